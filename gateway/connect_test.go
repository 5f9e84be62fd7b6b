package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// carol is a third sandbox, for rules the other two do not have.
const carol = "127.0.0.20"

// world is an env with two HTTPS upstreams and the names that lead to
// them, and to the private and metadata ranges.
type world struct {
	*env
	apiPort   uint16 // 127.0.0.5: api, internal and metadata.example.test
	filesPort uint16 // 127.0.0.6: files.pkg.example.test, pkg.example.test

	mu  sync.Mutex
	sni []string // server names the api upstream was asked for
}

func newWorld(t testing.TB) *world {
	e := newEnv(t)
	w := &world{env: e}
	hello := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(rw, "hello from "+r.Host) })
	w.apiPort = e.httpsUpstream("127.0.0.5", hello, "api.example.test", "internal.example.test", "metadata.example.test")
	w.filesPort = e.httpsUpstream("127.0.0.6", hello, "files.pkg.example.test", "pkg.example.test")
	e.dns.set("api.example.test", "127.0.0.5")
	e.dns.set("evil.example.test", "127.0.0.5")
	e.dns.set("files.pkg.example.test", "127.0.0.6")
	e.dns.set("pkg.example.test", "127.0.0.6")
	e.dns.set("internal.example.test", "10.1.2.3")
	e.dns.set("metadata.example.test", "169.254.169.254")
	e.redirectDial(hostPortOf("10.1.2.3", w.apiPort), hostPortOf("127.0.0.5", w.apiPort))
	e.redirectDial(hostPortOf("169.254.169.254", w.apiPort), hostPortOf("127.0.0.5", w.apiPort))
	return w
}

// tunnelTo names 127.0.0.7 host, allows alice to reach host:port, and
// opens her tunnel there.
func (w *world) tunnelTo(t *testing.T, host string, port uint16) *tunnelConn {
	t.Helper()
	w.dns.set(host, "127.0.0.7")
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(port, host)}})
	conn, resp := w.connect(alice, hostPortOf(host, port))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	return conn
}

// recordSNI has the api upstream's server remember the server names it
// is asked for; only a ClientHello that reached it is seen.
func (w *world) recordSNI(t testing.TB) {
	srvHello := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(rw, "hello") })
	cert := w.ca.certificate(t, "127.0.0.5", "api.example.test")
	l := listen(t, "127.0.0.5")
	w.apiPort = portOf(l)
	srv := &http.Server{Handler: srvHello, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			w.mu.Lock()
			w.sni = append(w.sni, h.ServerName)
			w.mu.Unlock()
			return nil, nil
		},
	}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
}

func (w *world) sniSeen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.sni)
}

func (w *world) get(src, url string) (string, error) {
	resp, err := w.proxyClient(src).Get(url)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	return readBody(w.t, resp), nil
}

// refusedConnect opens a tunnel by hand and wants it refused with status
// and exactly message, in the status line and in the body.
func (w *world) refusedConnect(t *testing.T, src, target string, status int, message string) {
	t.Helper()
	_, resp := w.connect(src, target)
	if resp.StatusCode != status {
		t.Fatalf("CONNECT %s from %s: status %s, want %d", target, src, resp.Status, status)
	}
	if body := readBody(t, resp); body != messagePrefix+message+"\n" {
		t.Errorf("CONNECT %s: body\n%q, want\n%q", target, body, messagePrefix+message+"\n")
	}
	if !strings.Contains(resp.Status, messagePrefix+message) {
		t.Errorf("CONNECT %s: status line %q does not carry the message", target, resp.Status)
	}
}

func TestConnectCarriesHTTPSToListedHost(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.apiPort, "api.example.test")}})
	client := w.proxyClient(alice)

	resp, err := client.Get(fmt.Sprintf("https://api.example.test:%d/", w.apiPort))
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); body != fmt.Sprintf("hello from api.example.test:%d", w.apiPort) {
		t.Errorf("body %q", body)
	}
	// The client verified the upstream's own certificate, from the test
	// CA whose key the gateway does not have: nothing terminated TLS on
	// the way.
	leaf := resp.TLS.PeerCertificates[0]
	if len(resp.TLS.VerifiedChains) == 0 || !slices.Contains(leaf.DNSNames, "api.example.test") || leaf.Issuer.CommonName != "gateway test CA" {
		t.Errorf("peer certificate %v issued by %q, chains %d", leaf.DNSNames, leaf.Issuer.CommonName, len(resp.TLS.VerifiedChains))
	}
	eventually(t, "one open tunnel", func() bool { return metricValue(t, w.gw.metrics.openTunnels) == 1 })

	client.CloseIdleConnections()
	line := w.logs.waitLine(t, `"kind"="connect"`, `"verdict"="allowed"`)
	for _, want := range []string{`"sandbox"="alice"`, `"owner"="alice@example.test"`, `"host"="api.example.test"`, fmt.Sprintf(`"port"=%d`, w.apiPort), `"reason"=""`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %s lacks %s", line, want)
		}
	}
	if strings.Contains(line, `"bytesUp"=0`) || strings.Contains(line, `"bytesDown"=0`) {
		t.Errorf("log line %s counts no bytes", line)
	}
	if got := metricValue(t, w.gw.metrics.requests.WithLabelValues(kindConnect, verdictAllowed)); got != 1 {
		t.Errorf("requests_total{connect,allowed} = %v, want 1", got)
	}
	if got := metricValue(t, w.gw.metrics.openTunnels); got != 0 {
		t.Errorf("open_tunnels = %v after the tunnel closed", got)
	}
	if up, down := metricValue(t, w.gw.metrics.bytes.WithLabelValues("up")), metricValue(t, w.gw.metrics.bytes.WithLabelValues("down")); up < 100 || down < 100 {
		t.Errorf("bytes_total up %v down %v: a TLS handshake is more than that", up, down)
	}
	families, err := w.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"agentsandbox_gateway_requests_total", "agentsandbox_gateway_bytes_total", "agentsandbox_gateway_open_tunnels"} {
		if !slices.Contains(names, want) {
			t.Errorf("registry lacks %s (has %v)", want, names)
		}
	}
}

func TestConnectWildcardCoversSubdomainsNotParent(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.filesPort, "*.pkg.example.test")}})

	if _, err := w.get(alice, fmt.Sprintf("https://files.pkg.example.test:%d/", w.filesPort)); err != nil {
		t.Errorf("files.pkg.example.test: %v", err)
	}
	// Names compare case-insensitively, a trailing dot included.
	if _, resp := w.connect(alice, fmt.Sprintf("FILES.Pkg.example.test.:%d", w.filesPort)); resp.StatusCode != http.StatusOK {
		t.Errorf("FILES.Pkg.example.test.: %s", resp.Status)
	}
	_, err := w.get(alice, fmt.Sprintf("https://pkg.example.test:%d/", w.filesPort))
	want := fmt.Sprintf("%shost pkg.example.test:%d is not in sandbox alice's egress allow-list; a template's network.egress[].hosts allows it",
		messagePrefix, w.filesPort)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("pkg.example.test: error %v, want one saying %q", err, want)
	}
}

func TestConnectRefusesUnlistedHostWithoutResolvingIt(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.apiPort, "api.example.test")}})

	w.refusedConnect(t, alice, hostPortOf("evil.example.test", w.apiPort), http.StatusForbidden, fmt.Sprintf(
		"host evil.example.test:%d is not in sandbox alice's egress allow-list; a template's network.egress[].hosts allows it", w.apiPort))
	// A refused name is not looked up: the gateway's resolver carries no
	// data out for the sandbox.
	if w.dns.wasQueried("evil.example.test") {
		t.Error("the gateway resolved a name it refused")
	}
	line := w.logs.waitLine(t, `"verdict"="refused"`, `"reason"="host-not-allowed"`)
	if !strings.Contains(line, `"host"="evil.example.test"`) {
		t.Errorf("log line %s", line)
	}
	eventually(t, "the refusal counted", func() bool {
		return metricValue(t, w.gw.metrics.requests.WithLabelValues(kindConnect, verdictRefused)) == 1
	})
}

func TestConnectRefusesPortOutsideRule(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.apiPort, "api.example.test")}})
	other := w.apiPort + 1
	w.refusedConnect(t, alice, hostPortOf("api.example.test", other), http.StatusForbidden, fmt.Sprintf(
		"host api.example.test:%d is in sandbox alice's egress allow-list on port %d only; a hosts rule's ports (network.egress[].ports) allow port %d",
		other, w.apiPort, other))
}

func TestConnectIPLiteralNeedsCIDRRule(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.apiPort, "api.example.test")}})
	w.sandbox(bob, "bob", v1.Network{Egress: []v1.EgressRule{cidrRule("127.0.0.5/32", w.apiPort)}})

	for _, target := range []string{hostPortOf("127.0.0.5", w.apiPort), hostPortOf("::ffff:127.0.0.5", w.apiPort)} {
		w.refusedConnect(t, alice, target, http.StatusForbidden, fmt.Sprintf(
			"IP address 127.0.0.5:%d is refused: name the host instead (a template's network.egress[].hosts allows names), "+
				"or allow the address with a cidr rule (network.egress[].cidr)", w.apiPort))
	}
	// A cidr rule allows the address, IPv4-mapped or not, on its port: a
	// TLS client sends no server name for an address, and verifies the
	// certificate's IP.
	if _, err := w.get(bob, fmt.Sprintf("https://127.0.0.5:%d/", w.apiPort)); err != nil {
		t.Errorf("bob to 127.0.0.5: %v", err)
	}
	if _, resp := w.connect(bob, hostPortOf("::ffff:127.0.0.5", w.apiPort)); resp.StatusCode != http.StatusOK {
		t.Errorf("bob to ::ffff:127.0.0.5: %s", resp.Status)
	}
	if _, resp := w.connect(bob, hostPortOf("127.0.0.5", w.apiPort+1)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob to 127.0.0.5 on another port: %s", resp.Status)
	}
}

// A name no hosts rule names reaches the answers a cidr rule allows, as
// the sandbox could without the gateway, and nothing else.
func TestConnectCarriesUnlistedNameToCIDRAllowedAnswers(t *testing.T) {
	w := newWorld(t)
	w.sandbox(bob, "bob", v1.Network{Egress: []v1.EgressRule{cidrRule("127.0.0.5/32", w.apiPort)}})

	got, err := w.get(bob, fmt.Sprintf("https://api.example.test:%d/", w.apiPort))
	if err != nil || !strings.Contains(got, "hello from api.example.test") {
		t.Errorf("a name whose answer bob's cidr rule allows: %q, %v", got, err)
	}
	for _, target := range []string{hostPortOf("files.pkg.example.test", w.filesPort), hostPortOf("api.example.test", w.apiPort+1)} {
		w.refusedConnect(t, bob, target, http.StatusForbidden,
			"host "+target+" is not in sandbox bob's egress allow-list; a template's network.egress[].hosts allows it")
	}
}

func TestConnectRefusesNamesResolvingIntoBlockedRanges(t *testing.T) {
	w := newWorld(t)
	hosts := hostsRule(w.apiPort, "internal.example.test", "metadata.example.test")
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hosts}})
	w.sandbox(bob, "bob", v1.Network{Egress: []v1.EgressRule{hosts,
		cidrRule("10.1.2.3/32", w.apiPort), cidrRule("169.254.169.254/32", w.apiPort)}})
	// A broad rule does not name the blocked ranges: the NetworkPolicy
	// carves them out of it, and so does the gateway.
	w.sandbox(carol, "carol", v1.Network{Egress: []v1.EgressRule{hosts, cidrRule("0.0.0.0/0", w.apiPort)}})

	for _, c := range []struct{ name, answer, inside string }{
		{"internal.example.test", "10.1.2.3", "10.0.0.0/8"},
		{"metadata.example.test", "169.254.169.254", "169.254.0.0/16"},
	} {
		message := fmt.Sprintf("%s resolves to %s, inside %s, which the gateway refuses unless a cidr rule allows it", c.name, c.answer, c.inside)
		w.refusedConnect(t, alice, hostPortOf(c.name, w.apiPort), http.StatusForbidden, message)
		w.refusedConnect(t, carol, hostPortOf(c.name, w.apiPort), http.StatusForbidden, message)
		// Bob's cidr rules name the addresses; the test's dial reaches
		// them on loopback, where the upstream answers for the name.
		body, err := w.get(bob, fmt.Sprintf("https://%s:%d/", c.name, w.apiPort))
		if err != nil || !strings.HasPrefix(body, "hello from "+c.name) {
			t.Errorf("bob to %s: %q, %v", c.name, body, err)
		}
	}
}

func TestConnectRefusesClientHelloForAnotherHost(t *testing.T) {
	w := newWorld(t)
	w.recordSNI(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.apiPort, "api.example.test")}})

	conn, resp := w.connect(alice, hostPortOf("api.example.test", w.apiPort))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	err := tls.Client(conn, &tls.Config{ServerName: "files.pkg.example.test", RootCAs: w.ca.pool}).Handshake()
	if err == nil {
		t.Fatal("a TLS handshake naming files.pkg.example.test went through a tunnel to api.example.test")
	}
	line := w.logs.waitLine(t, `"reason"="sni-mismatch"`)
	if !containsAll(line, `"verdict"="refused"`, `"host"="api.example.test"`) {
		t.Errorf("log line %s", line)
	}
	if got := metricValue(t, w.gw.metrics.requests.WithLabelValues(kindConnect, verdictRefused)); got != 1 {
		t.Errorf("requests_total{connect,refused} = %v, want 1", got)
	}
	if seen := w.sniSeen(); slices.Contains(seen, "files.pkg.example.test") {
		t.Errorf("the upstream received the ClientHello for files.pkg.example.test (saw %v)", seen)
	}

	// The same name in other letters is the same host.
	conn, resp = w.connect(alice, hostPortOf("api.example.test", w.apiPort))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	if err := tls.Client(conn, &tls.Config{ServerName: "API.Example.test", RootCAs: w.ca.pool}).Handshake(); err != nil {
		t.Errorf("handshake naming API.Example.test: %v", err)
	}
}

func TestConnectCutsUnreadableClientHello(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.apiPort, "api.example.test")}})
	conn, resp := w.connect(alice, hostPortOf("api.example.test", w.apiPort))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	// A handshake record holding a ServerHello, not a ClientHello: what
	// the gateway cannot check does not pass.
	_, _ = conn.Write([]byte{recordTypeHandshake, 3, 1, 0, 4, 2, 0, 0, 0})
	if got, err := io.ReadAll(conn); len(got) != 0 || err != nil {
		t.Errorf("read %q, %v; want the tunnel closed", got, err)
	}
	w.logs.waitLine(t, `"verdict"="refused"`, `"reason"="bad-client-hello"`)
}

func TestConnectCarriesNonTLSBothWays(t *testing.T) {
	w := newWorld(t)
	const greeting = "SSH-2.0-upstream\r\n"
	port := serveRaw(t, "127.0.0.7", func(conn net.Conn) {
		// The server speaks first, then answers once the client is
		// done: what only a half-closed tunnel can carry.
		_, _ = io.WriteString(conn, greeting)
		got, _ := io.ReadAll(conn)
		_, _ = io.WriteString(conn, "got: "+string(got))
	})
	conn := w.tunnelTo(t, "git.example.test", port)
	r := bufio.NewReader(conn)
	if got, err := r.ReadString('\n'); got != greeting {
		t.Fatalf("greeting %q, %v: the upstream's first bytes did not arrive before the client spoke", got, err)
	}
	_, _ = io.WriteString(conn, "ping\n")
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(r); err != nil || string(rest) != "got: ping\n" {
		t.Fatalf("after half-close: %q, %v", rest, err)
	}
	line := w.logs.waitLine(t, `"host"="git.example.test"`)
	if want := fmt.Sprintf(`"bytesUp"=5 "bytesDown"=%d "verdict"="allowed"`, len(greeting)+len("got: ping\n")); !strings.Contains(line, want) {
		t.Errorf("log line %s lacks %s", line, want)
	}
}

func TestConnectRefusesUnknownSource(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.apiPort, "api.example.test")}})
	w.refusedConnect(t, unknown, hostPortOf("api.example.test", w.apiPort), http.StatusForbidden,
		"127.0.0.4 is not a sandbox this gateway knows; only sandbox pods, from their own address, may use it")
	w.logs.waitLine(t, `"source"="127.0.0.4"`, `"reason"="unknown-source"`)
}

func TestConnectAppliesEachSandboxsOwnRules(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(w.apiPort, "api.example.test")}})
	w.sandbox(bob, "bob", v1.Network{Egress: []v1.EgressRule{hostsRule(w.filesPort, "files.pkg.example.test")}})
	api := fmt.Sprintf("https://api.example.test:%d/", w.apiPort)
	files := fmt.Sprintf("https://files.pkg.example.test:%d/", w.filesPort)
	for _, c := range []struct {
		src, url string
		allowed  bool
	}{
		{alice, api, true}, {alice, files, false},
		{bob, files, true}, {bob, api, false},
	} {
		_, err := w.get(c.src, c.url)
		if c.allowed && err != nil {
			t.Errorf("%s to %s: %v", c.src, c.url, err)
		}
		if !c.allowed && (err == nil || !strings.Contains(err.Error(), "is not in sandbox")) {
			t.Errorf("%s to %s: %v, want a refusal", c.src, c.url, err)
		}
	}
}

func TestConnectReportsUnreachableUpstream(t *testing.T) {
	w := newWorld(t)
	l := listen(t, "127.0.0.9")
	port := portOf(l)
	_ = l.Close()
	w.dns.set("down.example.test", "127.0.0.9")
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(port, "down.example.test")}})

	_, resp := w.connect(alice, hostPortOf("down.example.test", port))
	body := readBody(t, resp)
	want := fmt.Sprintf("%scould not connect to down.example.test:%d: ", messagePrefix, port)
	if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(body, want) || !strings.Contains(body, "refused") {
		t.Errorf("%s %q, want 502 %q...", resp.Status, body, want)
	}
}

func TestConnectDoesNotWaitForClientToSpeakFirst(t *testing.T) {
	// The upstream→sandbox copy runs while the gateway waits for the
	// sandbox's first byte: a sandbox that never speaks still gets
	// everything the server sends, and then its end.
	w := newWorld(t)
	port := serveRaw(t, "127.0.0.7", func(conn net.Conn) { _, _ = io.WriteString(conn, "220 ready\r\n") })
	conn := w.tunnelTo(t, "smtp.example.test", port)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(conn)
	if string(got) != "220 ready\r\n" || err != nil {
		t.Errorf("read %q, %v", got, err)
	}
	_ = conn.Close()
	w.logs.waitLine(t, `"host"="smtp.example.test"`, `"bytesUp"=0 "bytesDown"=11`)
}

// ruleChange is a change of sandbox alice's rules while it is connected to
// an upstream at port, and the end of the detail the gateway logs as it
// cuts the connection ("" where the rules still allow it).
type ruleChange struct {
	change func(w *world, port uint16)
	detail string
}

// ruleChanges are the changes of rules that allowed alice host (at ip) by
// a hosts rule which an open tunnel or response follows: it stays while
// they still allow its address (after the change, by a cidr rule), and is
// cut once they do not, or once no sandbox has its source address.
func ruleChanges(host, ip string) map[string]ruleChange {
	return map[string]ruleChange{
		"host dropped": {
			change: func(w *world, port uint16) {
				w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(port, "api.example.test")}})
			},
			detail: "sandbox alice's egress rules no longer allow it",
		},
		"port dropped": {
			change: func(w *world, port uint16) {
				w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(port+1, host)}})
			},
			detail: "sandbox alice's egress rules no longer allow it",
		},
		"sandbox gone": {
			change: func(w *world, _ uint16) { w.forget(alice) },
			detail: "no sandbox has address " + alice + " any more",
		},
		"allowed by a cidr rule instead": {
			change: func(w *world, port uint16) {
				w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{cidrRule(ip+"/32", port)}})
			},
		},
	}
}

// An open tunnel follows its sandbox's rules as they change (ruleChanges).
func TestConnectClosesTunnelsTheRulesNoLongerAllow(t *testing.T) {
	for name, tc := range ruleChanges("echo.example.test", "127.0.0.7") {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			port := serveRaw(t, "127.0.0.7", func(conn net.Conn) { _, _ = io.Copy(conn, conn) })
			conn := w.tunnelTo(t, "echo.example.test", port)
			r := bufio.NewReader(conn)
			echo := func(line string) error {
				if _, err := io.WriteString(conn, line); err != nil {
					return err
				}
				got, err := r.ReadString('\n')
				if err == nil && got != line {
					err = fmt.Errorf("echoed %q, want %q", got, line)
				}
				return err
			}
			if err := echo("before\n"); err != nil {
				t.Fatal(err)
			}
			tc.change(w, port)
			if tc.detail == "" {
				time.Sleep(300 * time.Millisecond) // several rechecks
				if err := echo("after\n"); err != nil {
					t.Fatalf("the tunnel its rules still allow was cut: %v", err)
				}
				return
			}
			w.logs.waitLine(t, `"host"="echo.example.test"`, `"verdict"="refused"`, `"reason"="revoked"`,
				fmt.Sprintf(`"detail"="the tunnel to echo.example.test:%d was closed: %s"`, port, tc.detail))
			if err := echo("after\n"); err == nil {
				t.Fatal("the tunnel carried bytes after its rules stopped allowing it")
			}
		})
	}
}
