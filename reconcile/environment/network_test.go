package environment

import (
	"net/netip"
	"testing"

	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

func TestEgressAllowsReadsThePolicyAsTheEnforcerWould(t *testing.T) {
	port := func(p int32) v1.NetworkPort { return v1.NetworkPort{Port: p} }
	udp := v1.NetworkPort{Port: 53, Protocol: "UDP"}
	network := v1.Network{Egress: []v1.EgressRule{
		{CIDR: "0.0.0.0/0", Ports: []v1.NetworkPort{port(443)}},
		{CIDR: "10.244.0.1/32", Ports: []v1.NetworkPort{{Port: 8000, EndPort: ptr.To[int32](8100)}}},
		{CIDR: "140.82.112.0/20", Except: []string{"140.82.112.5/32"}},
		{CIDR: "192.0.2.0/24", Ports: []v1.NetworkPort{udp}},
		{CIDR: "::/0", Ports: []v1.NetworkPort{port(443)}},
	}}
	cases := []struct {
		address string
		want    bool
	}{
		{"93.184.216.34:443", true},      // the broad rule
		{"93.184.216.34:80", false},      // not its port
		{"169.254.169.254:443", false},   // metadata: excepted from the broad rule
		{"10.96.0.1:443", false},         // the service range: excepted
		{"10.244.0.1:8050", true},        // named exactly, in the port range
		{"10.244.0.1:10250", false},      // named, not that port
		{"140.82.112.9:22", true},        // all ports
		{"140.82.112.5:22", false},       // its own exception
		{"192.0.2.1:53", false},          // UDP only
		{"[2606:4700::1]:443", true},     // IPv6 broad rule
		{"[fe80::1%eth0]:443", false},    // link-local: excepted
		{"[::ffff:10.0.0.1]:443", false}, // IPv4-mapped: the IPv4 rules decide
	}
	for _, tc := range cases {
		if got := EgressAllows(network, DefaultBlockedEgress, netip.MustParseAddrPort(tc.address)); got != tc.want {
			t.Errorf("EgressAllows(%s) = %v, want %v", tc.address, got, tc.want)
		}
	}
	if EgressAllows(v1.Network{}, DefaultBlockedEgress, netip.MustParseAddrPort("93.184.216.34:443")) {
		t.Error("a template without egress rules allows an address")
	}
}

// TestClusterDNSOnlyWhenTheTemplateAllowsIt: a template that says nothing
// of DNS gets no way to the cluster resolver (it forwards any name, so a
// query's name carries data out); one that allows it gets the kube-dns
// pods on port 53 and nothing else.
func TestClusterDNSOnlyWhenTheTemplateAllowsIt(t *testing.T) {
	if np := networkPolicy("sandbox-a", v1.Network{}, nil, Egress{}); len(np.Spec.Egress) != 0 {
		t.Errorf("a template without clusterDNS allows %+v", np.Spec.Egress)
	}
	np := networkPolicy("sandbox-a", v1.Network{ClusterDNS: ptr.To(true)}, nil, Egress{})
	if len(np.Spec.Egress) != 1 {
		t.Fatalf("clusterDNS: true gives %d egress rules, want the resolver's alone", len(np.Spec.Egress))
	}
	rule := np.Spec.Egress[0]
	if len(rule.To) != 1 || rule.To[0].PodSelector == nil || rule.To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" ||
		rule.To[0].NamespaceSelector == nil || rule.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" {
		t.Errorf("the resolver rule's peers: %+v", rule.To)
	}
	for _, p := range rule.Ports {
		if p.Port == nil || p.Port.IntValue() != 53 {
			t.Errorf("the resolver rule opens port %v", p.Port)
		}
	}
}

// TestICMPSocketsOnlyWhereThePolicyLetsICMPThrough: a sandbox's pod may
// open no ICMP socket (no group in ping_group_range) unless a cidr rule of
// every port, the only kind NetworkPolicy lets ICMP through, allows some.
func TestICMPSocketsOnlyWhereThePolicyLetsICMPThrough(t *testing.T) {
	closed := []v1.Network{
		{},
		{Egress: []v1.EgressRule{{CIDR: "0.0.0.0/0", Ports: []v1.NetworkPort{{Port: 443}}}}},
		{Egress: []v1.EgressRule{{Hosts: []string{"pypi.org"}}, {Service: &v1.ServiceReference{Namespace: "m", Name: "s"}}}},
	}
	for _, n := range closed {
		pod := Blueprint{template: &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Network: n}}}.Pod()
		if got := pod.Spec.SecurityContext.Sysctls; len(got) != 1 || got[0].Name != "net.ipv4.ping_group_range" || got[0].Value != "1 0" {
			t.Errorf("egress %+v: sysctls %+v, want ping_group_range 1 0", n.Egress, got)
		}
	}
	open := v1.Network{Egress: []v1.EgressRule{{CIDR: "10.20.0.0/16"}}}
	if got := icmpSysctls(open); got != nil {
		t.Errorf("a cidr rule of every port: sysctls %+v, want none", got)
	}
}
