// Package testdns is a DNS server for tests: it answers A queries for the
// names a test sets, over UDP, and NXDOMAIN for every other name, so a test
// can make a name resolve anywhere (a public-looking test address, a
// private one, the metadata address) without traffic leaving the machine.
package testdns

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// Server answers the names set with Set.
type Server struct {
	conn net.PacketConn

	mu      sync.Mutex
	answers map[string][]netip.Addr
	queried map[string]bool
}

// Start serves on addr (host:port, UDP) until Close.
func Start(addr string) (*Server, error) {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{conn: conn, answers: map[string][]netip.Addr{}, queried: map[string]bool{}}
	go s.serve()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.conn.LocalAddr().String() }

// Close stops the server.
func (s *Server) Close() error { return s.conn.Close() }

// Set makes name resolve to addrs (IPv4); none makes it NXDOMAIN again.
func (s *Server) Set(name string, addrs ...netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[canonical(name)] = addrs
}

// Queried tells whether anyone asked for name.
func (s *Server) Queried(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queried[canonical(name)]
}

// Resolver is a resolver that asks this server only.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr())
	}}
}

func canonical(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) + "." }

func (s *Server) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if reply, ok := s.answer(buf[:n]); ok {
			_, _ = s.conn.WriteTo(reply, from)
		}
	}
}

// answer builds the reply to one query: the A records set for its name,
// none for its other types (the resolver asks AAAA too), NXDOMAIN for a
// name never set.
func (s *Server) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	header, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	addrs, known := s.answers[name]
	s.queried[name] = true
	s.mu.Unlock()
	reply := dnsmessage.Header{ID: header.ID, Response: true, Authoritative: true, RecursionDesired: header.RecursionDesired, RecursionAvailable: true}
	if !known || len(addrs) == 0 {
		reply.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, reply)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	if q.Type == dnsmessage.TypeA {
		for _, a := range addrs {
			if !a.Is4() {
				continue
			}
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 1}
			if b.AResource(rh, dnsmessage.AResource{A: a.As4()}) != nil {
				return nil, false
			}
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
