package gateway

import (
	"context"
	"crypto/tls"
	"net/netip"
	"testing"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

func TestMatchHost(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"pypi.org", "pypi.org", true},
		{"pypi.org", "files.pypi.org", false},
		{"pypi.org", "pypi.org.evil.test", false},
		{"PyPI.org.", "pypi.org", true},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"*.example.com", "a.example.com.evil.test", false},
		{"*.githubusercontent.com", "raw.githubusercontent.com", true},
	} {
		if got := matchHost(c.pattern, normalizeName(c.name)); got != c.want {
			t.Errorf("matchHost(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"pypi.org": true, "_acme.example.com": true, "a-b.c": true,
		"": false, "a..b": false, ".a": false, "a b": false, "a/b": false, "exa\x00mple.com": false,
	} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestPortAllowed(t *testing.T) {
	end := int32(8080)
	ports := []v1.NetworkPort{{Port: 443}, {Port: 8000, EndPort: &end}, {Port: 53, Protocol: "UDP"}}
	for port, want := range map[uint16]bool{443: true, 8000: true, 8080: true, 8081: false, 7999: false, 53: false, 80: false} {
		if got := portAllowed(ports, port); got != want {
			t.Errorf("port %d: %v, want %v", port, got, want)
		}
	}
	if !portAllowed(nil, 22) {
		t.Error("a rule without ports allows every port")
	}
}

func TestCIDRAllowsAsTheNetworkPolicyDoes(t *testing.T) {
	g, err := New(Config{Directory: &directory{}, Secrets: &fakeSecrets{}, Blocked: testBlocked})
	if err != nil {
		t.Fatal(err)
	}
	n := &v1.Network{Egress: []v1.EgressRule{
		{CIDR: "0.0.0.0/0", Except: []string{"203.0.113.0/24"}, Ports: []v1.NetworkPort{{Port: 443}}},
		{CIDR: "10.1.0.0/16", Ports: []v1.NetworkPort{{Port: 5432}}},
		{CIDR: "169.254.169.254/32"},
		{Hosts: []string{"pypi.org"}},
	}}
	for _, c := range []struct {
		addr string
		port uint16
		want bool
	}{
		{"198.51.100.7", 443, true},
		{"198.51.100.7", 80, false},
		{"203.0.113.9", 443, false},    // excepted
		{"10.1.2.3", 443, false},       // blocked: 0.0.0.0/0 does not name 10.0.0.0/8
		{"10.1.2.3", 5432, true},       // named by 10.1.0.0/16
		{"10.2.0.1", 5432, false},      // outside it
		{"169.254.169.254", 80, true},  // named, all ports
		{"169.254.169.253", 80, false}, // not named
		{"0.0.0.0", 443, false},        // unspecified: always blocked
		{"2001:db8::1", 443, false},    // no IPv6 rule
		{"192.168.1.1", 443, false},    // blocked
		{"100.64.0.1", 443, false},     // blocked (CGNAT)
		{"8.8.8.8", 443, true},
	} {
		if got := g.cidrAllows(n, netip.MustParseAddr(c.addr), c.port); got != c.want {
			t.Errorf("%s:%d: %v, want %v", c.addr, c.port, got, c.want)
		}
	}
}

func TestNewRefusesUnverifiedUpstreams(t *testing.T) {
	if _, err := New(Config{Directory: &directory{}, Secrets: &fakeSecrets{}, UpstreamTLS: &tls.Config{InsecureSkipVerify: true}}); err == nil {
		t.Error("New accepted UpstreamTLS with InsecureSkipVerify")
	}
}

// namesAsked is a Resolver that remembers the names it is asked for.
type namesAsked []string

func (n *namesAsked) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	*n = append(*n, host)
	return []netip.Addr{netip.MustParseAddr("198.51.100.7")}, nil
}

func TestPermitResolvesRootedNames(t *testing.T) {
	// A rooted name is looked up as it is: the search domains of the
	// gateway's pod (ndots:5 in Kubernetes) never make it a cluster name.
	var asked namesAsked
	g, err := New(Config{Directory: &directory{}, Secrets: &fakeSecrets{}, Resolver: &asked})
	if err != nil {
		t.Fatal(err)
	}
	c := Client{Sandbox: "alice", Network: &v1.Network{Egress: []v1.EgressRule{hostsRule(443, "pypi.org")}}}
	addrs, f := g.permit(context.Background(), c, "PyPI.org.", 443)
	if f != nil || len(addrs) != 1 || len(asked) != 1 || asked[0] != "pypi.org." {
		t.Errorf("permit: %v, %v; asked %q", addrs, f, asked)
	}
}
