package environment

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// DefaultBlockedEgress are the ranges a sandbox never reaches through a
// broader allow rule: link-local (the cloud metadata endpoint lives at
// 169.254.169.254), the private ranges clusters take pod and service IPs
// from, and carrier-grade NAT space some clusters use. A rule that names one
// of them, or a range inside one, allows it explicitly.
//
// IPv6 has the equivalents (link-local, unique-local, the deprecated
// site-local) and ranges that carry an IPv4 address inside: a NAT64
// gateway forwards 64:ff9b::a00:1 to 10.0.0.1, and 6to4 and Teredo
// addresses embed one too, so a ::/0 rule would otherwise reach the private
// IPv4 ranges through them. (IPv4-mapped addresses, ::ffff:0:0/96, never
// leave the host as IPv6: their packets are IPv4, which the IPv4 ranges
// above already govern.)
var DefaultBlockedEgress = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated, still routed privately)
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64, well-known prefix (RFC 6052)
	netip.MustParsePrefix("64:ff9b:1::/48"), // NAT64, local-use prefix (RFC 8215)
	netip.MustParsePrefix("2002::/16"),      // 6to4
	netip.MustParsePrefix("2001::/32"),      // Teredo
}

// egressExcept returns the rule's exceptions plus every blocked range lying
// strictly inside the rule's CIDR and not already excepted.
func egressExcept(cidr netip.Prefix, except []string, blocked []netip.Prefix) []string {
	out := append([]string(nil), except...)
	for _, b := range blocked {
		if b.Addr().Is4() != cidr.Addr().Is4() || b.Bits() <= cidr.Bits() || !cidr.Contains(b.Addr()) {
			continue
		}
		if !coveredBy(b, except) {
			out = append(out, b.String())
		}
	}
	return out
}

func coveredBy(p netip.Prefix, except []string) bool {
	for _, e := range except {
		if ep, err := netip.ParsePrefix(e); err == nil && ep.Bits() <= p.Bits() && ep.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// networkPolicy denies all ingress and egress of the sandbox namespace except
// what the template allows: its cidr rules directly, its service rules as
// the pods behind the Services, and its hosts rules and endpoints through
// the egress gateway (egress).
func networkPolicy(namespace string, n v1.Network, blocked []netip.Prefix, egress Egress) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: namespace, Labels: managedLabels()},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      []networkingv1.NetworkPolicyEgressRule{},
		},
	}
	if n.AllowsClusterDNS() {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			}},
			Ports: []networkingv1.NetworkPolicyPort{port(53, nil, v1.Protocol(corev1.ProtocolUDP)), port(53, nil, v1.Protocol(corev1.ProtocolTCP))},
		})
	}
	for _, rule := range n.Egress {
		if rule.CIDR == "" {
			continue // a hosts or service rule: egress's
		}
		cidr, err := netip.ParsePrefix(rule.CIDR)
		if err != nil {
			continue // the template controller refuses such templates
		}
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: rule.CIDR, Except: egressExcept(cidr, rule.Except, blocked)}}},
			Ports: ports(rule.Ports),
		})
	}
	np.Spec.Egress = append(np.Spec.Egress, egress.egressPolicyRules(n)...)
	for _, peer := range n.IngressFrom {
		p := networkingv1.NetworkPolicyPeer{}
		if peer.NamespaceLabels != nil || peer.PodLabels != nil {
			// A pod selector alone would mean "pods of the sandbox's own
			// namespace"; the peer means pods anywhere unless narrowed.
			p.NamespaceSelector = &metav1.LabelSelector{MatchLabels: peer.NamespaceLabels}
		}
		if peer.PodLabels != nil {
			p.PodSelector = &metav1.LabelSelector{MatchLabels: peer.PodLabels}
		}
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{p}, Ports: ports(peer.Ports),
		})
	}
	return np
}

func ports(in []v1.NetworkPort) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range in {
		out = append(out, port(p.Port, p.EndPort, p.Protocol))
	}
	return out
}

func port(number int32, end *int32, protocol v1.Protocol) networkingv1.NetworkPolicyPort {
	if protocol == "" {
		protocol = v1.Protocol(corev1.ProtocolTCP)
	}
	proto := corev1.Protocol(protocol)
	p := intstr.FromInt32(number)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p, EndPort: end}
}

// EgressAllows tells whether the NetworkPolicy of a sandbox with network n
// (and blocked, the ranges no broad rule reaches) lets it open a TCP
// connection to address: what the isolation check expects of each
// destination it tries. Cluster DNS, allowed to the kube-dns pods only,
// is not an address here.
func EgressAllows(n v1.Network, blocked []netip.Prefix, address netip.AddrPort) bool {
	return policyAllows(n, blocked, address.Addr(), func(ports []networkingv1.NetworkPolicyPort) bool {
		return portAllowed(ports, address.Port())
	})
}

// ICMPAllows tells whether that policy lets ICMP reach addr: only a cidr
// rule of every port does, as a NetworkPolicy names no other protocol.
func ICMPAllows(n v1.Network, blocked []netip.Prefix, addr netip.Addr) bool {
	return policyAllows(n, blocked, addr, func(ports []networkingv1.NetworkPolicyPort) bool { return len(ports) == 0 })
}

// policyAllows tells whether an ipBlock rule of the sandbox's policy whose
// ports satisfy portsMatch holds addr.
func policyAllows(n v1.Network, blocked []netip.Prefix, addr netip.Addr, portsMatch func([]networkingv1.NetworkPolicyPort) bool) bool {
	for _, rule := range networkPolicy("", n, blocked, Egress{}).Spec.Egress {
		if !portsMatch(rule.Ports) {
			continue
		}
		for _, peer := range rule.To {
			if peer.IPBlock != nil && inBlock(peer.IPBlock, addr) {
				return true
			}
		}
	}
	return false
}

func portAllowed(ports []networkingv1.NetworkPolicyPort, number uint16) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		if p.Port.IntVal <= int32(number) && int32(number) <= end {
			return true
		}
	}
	return false
}

func inBlock(block *networkingv1.IPBlock, addr netip.Addr) bool {
	addr = addr.WithZone("").Unmap()
	cidr, err := netip.ParsePrefix(block.CIDR)
	if err != nil || !cidr.Contains(addr) {
		return false
	}
	for _, e := range block.Except {
		if ex, err := netip.ParsePrefix(e); err == nil && ex.Contains(addr) {
			return false
		}
	}
	return true
}

// icmpSysctls close the pod's unprivileged ICMP sockets (the runtime opens
// them to every group) unless a cidr rule of every port lets ICMP through
// the policy: echo requests carry data as well as any packet, and the
// sandbox has no raw sockets. This holds under runc whatever the enforcer
// does with ICMP; gVisor's network stack ignores the sysctl, and there the
// policy alone stops ICMP.
func icmpSysctls(n v1.Network) []corev1.Sysctl {
	for _, r := range n.Egress {
		if r.CIDR != "" && len(r.Ports) == 0 {
			return nil
		}
	}
	return []corev1.Sysctl{{Name: "net.ipv4.ping_group_range", Value: "1 0"}}
}
