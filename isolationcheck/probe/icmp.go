package probe

import (
	"bytes"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// echoPayload marks the check's echo requests, so a reply is known as an
// answer to one of them.
var echoPayload = []byte("agentsandbox-check")

// ICMP sends an echo request to each IPv4 address in targets over an
// unprivileged ICMP socket (the only kind a process without CAP_NET_RAW
// may open, and only when net.ipv4.ping_group_range holds its group), and
// reports which replied within timeout. An echo carries whatever its
// payload holds, so a reply from past the policy is a way out.
func ICMP(targets []string, timeout time.Duration) ICMPResult {
	out := ICMPResult{Echoes: []ICMPEcho{}}
	conn, err := icmp.ListenPacket("udp4", "0.0.0.0")
	if err != nil {
		out.Socket = errnoName(err)
		return out
	}
	defer conn.Close()
	pending := map[netip.Addr]int{}
	for i, target := range targets {
		out.Echoes = append(out.Echoes, ICMPEcho{Address: target, Result: Timeout})
		addr, err := netip.ParseAddr(target)
		if err != nil || !addr.Is4() {
			out.Echoes[i].Result, out.Echoes[i].Detail = Failed, "not an IPv4 address"
			continue
		}
		request := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{Seq: i, Data: echoPayload}}
		b, err := request.Marshal(nil)
		if err == nil {
			_, err = conn.WriteTo(b, &net.UDPAddr{IP: addr.AsSlice()})
		}
		if err != nil {
			out.Echoes[i].Result, out.Echoes[i].Detail = Failed, errnoName(err)
			continue
		}
		pending[addr] = i
	}
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 1500)
	for len(pending) > 0 {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			break // the deadline: the rest stay timeouts
		}
		from, _ := netip.AddrFromSlice(peerIP(peer))
		if i, asked := pending[from.Unmap()]; asked && isEchoReply(buf[:n]) {
			out.Echoes[i].Result = Replied
			delete(pending, from.Unmap())
		}
	}
	return out
}

// peerIP is the address a ping socket's datagram came from.
func peerIP(a net.Addr) net.IP {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.IP
	}
	return nil
}

// isEchoReply tells whether b is an echo reply to one of the check's
// requests. (A ping socket's kernel rewrites the identifier, so the
// payload is what marks it.)
func isEchoReply(b []byte) bool {
	m, err := icmp.ParseMessage(1, b) // 1: ICMP for IPv4
	if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
		return false
	}
	echo, ok := m.Body.(*icmp.Echo)
	return ok && bytes.Equal(echo.Data, echoPayload)
}
