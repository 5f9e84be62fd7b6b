package probe

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// resolvConf is where the sandbox's resolvers are named.
const resolvConf = "/etc/resolv.conf"

// DNS asks each resolver the sandbox is given (resolv.conf's nameservers),
// the address clusters usually give theirs, and each of extra, over UDP,
// for the A record of a name under .invalid that no allow-list holds, with
// a random label so that no cache answers it. Any answer, NXDOMAIN
// included, means the query reached a resolver: one that forwards what it
// cannot answer carries whatever the name holds out of the cluster, past
// every egress rule.
func DNS(extra []string, timeout time.Duration) DNSResult {
	out := DNSResult{Configured: []string{}, Answers: []DNSAnswer{}}
	conf, err := os.ReadFile(resolvConf)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		out.Problems = append(out.Problems, err.Error())
	}
	out.Configured = nameservers(string(conf))
	label := make([]byte, 8)
	_, _ = rand.Read(label)
	out.Name = "agentsandbox-check-" + hex.EncodeToString(label) + ".invalid."
	servers := slices.Clone(out.Configured)
	if guess := usualClusterResolver(os.Getenv("KUBERNETES_SERVICE_HOST")); guess != "" {
		extra = append([]string{guess}, extra...)
	}
	for _, s := range extra {
		if !slices.Contains(servers, s) {
			servers = append(servers, s)
		}
	}
	for _, server := range servers {
		out.Answers = append(out.Answers, ask(server, out.Name, timeout))
	}
	return out
}

// usualClusterResolver is where clusters usually put their DNS Service:
// the tenth address of the service range, whose first is the API
// server's (kubeadm's 10.96.0.10, k3s's 10.43.0.10, EKS's 172.20.0.10). A
// sandbox given no cluster resolver can still ask that address, so the
// check asks it too.
func usualClusterResolver(apiServer string) string {
	ip, err := netip.ParseAddr(apiServer)
	if err != nil || !ip.Is4() {
		return ""
	}
	b := ip.As4()
	if b[3] != 1 {
		return ""
	}
	b[3] = 10
	return net.JoinHostPort(netip.AddrFrom4(b).String(), "53")
}

// nameservers reads the nameserver lines of a resolv.conf as host:port.
func nameservers(conf string) []string {
	out := []string{}
	for _, line := range strings.Split(conf, "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "nameserver" {
			out = append(out, net.JoinHostPort(fields[1], "53"))
		}
	}
	return out
}

// ask sends one query to server and reads its answer.
func ask(server, name string, timeout time.Duration) DNSAnswer {
	a := DNSAnswer{Server: server}
	id := uint16(time.Now().UnixNano())
	query, err := (&dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}).Pack()
	if err != nil {
		a.Result, a.Detail = Failed, err.Error()
		return a
	}
	conn, err := net.DialTimeout("udp", server, timeout)
	if err != nil {
		a.Result, a.Detail = Failed, err.Error()
		return a
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(query); err != nil {
		a.Result, a.Detail = outcome(err)
		return a
	}
	buf := make([]byte, 1500)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			a.Result, a.Detail = outcome(err)
			return a
		}
		var reply dnsmessage.Parser
		header, err := reply.Start(buf[:n])
		if err != nil || header.ID != id || !header.Response {
			continue // not the answer to this query
		}
		a.Result, a.Rcode = Answered, rcodeName(header.RCode)
		return a
	}
}

// rcodeName is a response code's usual mnemonic (RFC 1035's, as dig
// prints them).
func rcodeName(c dnsmessage.RCode) string {
	switch c {
	case dnsmessage.RCodeSuccess:
		return "NOERROR"
	case dnsmessage.RCodeFormatError:
		return "FORMERR"
	case dnsmessage.RCodeServerFailure:
		return "SERVFAIL"
	case dnsmessage.RCodeNameError:
		return "NXDOMAIN"
	case dnsmessage.RCodeNotImplemented:
		return "NOTIMP"
	case dnsmessage.RCodeRefused:
		return "REFUSED"
	}
	return c.String()
}
