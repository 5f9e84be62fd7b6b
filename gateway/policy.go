package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// tcp is the only protocol the gateway carries; port entries for UDP or
// SCTP allow nothing here.
const tcp v1.Protocol = "TCP"

// normalizeName is the form host names are compared in: rules, CONNECT
// targets and SNI alike are case-insensitive, and a trailing dot (the
// fully-qualified spelling) names the same host.
func normalizeName(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// validName reports whether a normalized name is one the gateway will
// look up: dot-separated labels of letters, digits, '-' and '_', within
// DNS's length limits.
func validName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
}

// matchHost reports whether a hosts rule entry allows name (normalized):
// an exact name, or *.example.com for any name below example.com, by one
// label or more, but not example.com itself.
func matchHost(pattern, name string) bool {
	pattern = normalizeName(pattern)
	if parent, ok := strings.CutPrefix(pattern, "*."); ok {
		return len(name) > len(parent)+1 && strings.HasSuffix(name, "."+parent)
	}
	return pattern == name
}

// portAllowed reports whether a rule's ports let TCP traffic to port
// through; a rule without ports allows them all.
func portAllowed(ports []v1.NetworkPort, port uint16) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != "" && p.Protocol != tcp {
			continue
		}
		end := p.Port
		if p.EndPort != nil {
			end = *p.EndPort
		}
		if p.Port <= int32(port) && int32(port) <= end {
			return true
		}
	}
	return false
}

// hostsAllow checks name:port against the client's hosts rules. When a rule
// names the host on other ports only, the refusal says which ports it has.
func hostsAllow(c Client, name string, port uint16) *refusal {
	var ports []string
	for _, rule := range c.Network.Egress {
		if !matchesAny(rule.Hosts, name) {
			continue
		}
		if portAllowed(rule.Ports, port) {
			return nil
		}
		ports = append(ports, describePorts(rule.Ports)...)
	}
	if len(ports) > 0 {
		noun := "port"
		if len(ports) > 1 || strings.Contains(ports[0], "-") {
			noun = "ports"
		}
		return refusef(http.StatusForbidden, reasonPortNotAllowed,
			"host %s is in sandbox %s's egress allow-list on %s %s only; a hosts rule's ports (network.egress[].ports) allow port %d",
			hostPort(name, port), c.Sandbox, noun, strings.Join(ports, ", "), port)
	}
	return refusef(http.StatusForbidden, reasonHostNotAllowed,
		"host %s is not in sandbox %s's egress allow-list; a template's network.egress[].hosts allows it",
		hostPort(name, port), c.Sandbox)
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if matchHost(p, name) {
			return true
		}
	}
	return false
}

// describePorts spells a rule's TCP ports as a user wrote them: 443,
// 8000-8080.
func describePorts(ports []v1.NetworkPort) []string {
	var out []string
	for _, p := range ports {
		if p.Protocol != "" && p.Protocol != tcp {
			continue
		}
		s := strconv.Itoa(int(p.Port))
		if p.EndPort != nil && *p.EndPort != p.Port {
			s += "-" + strconv.Itoa(int(*p.EndPort))
		}
		out = append(out, s)
	}
	return out
}

// cidrAllows reports whether a cidr rule of n lets TCP traffic to addr:port
// through, exactly as the sandbox's NetworkPolicy would
// (reconcile/environment): a rule reaches a blocked range only when it
// names that range or a range inside it, so 0.0.0.0/0 has every blocked
// range carved out and 10.1.2.3/32 does not.
func (g *Gateway) cidrAllows(n *v1.Network, addr netip.Addr, port uint16) bool {
	for _, rule := range n.Egress {
		if rule.CIDR == "" || !portAllowed(rule.Ports, port) {
			continue
		}
		cidr, err := netip.ParsePrefix(rule.CIDR)
		if err != nil || !cidr.Masked().Contains(addr) || anyContains(rule.Except, addr) {
			continue
		}
		if g.blockedInside(cidr, addr) {
			continue
		}
		return true
	}
	return false
}

// blockedInside reports whether addr lies in a blocked range strictly
// narrower than cidr, which a rule for cidr leaves out.
func (g *Gateway) blockedInside(cidr netip.Prefix, addr netip.Addr) bool {
	for _, b := range g.blocked {
		if b.Contains(addr) && b.Bits() > cidr.Bits() {
			return true
		}
	}
	return false
}

func anyContains(prefixes []string, addr netip.Addr) bool {
	for _, s := range prefixes {
		if p, err := netip.ParsePrefix(s); err == nil && p.Masked().Contains(addr) {
			return true
		}
	}
	return false
}

// blockedBy returns the first blocked range holding addr.
func (g *Gateway) blockedBy(addr netip.Addr) (netip.Prefix, bool) {
	for _, b := range g.blocked {
		if b.Contains(addr) {
			return b, true
		}
	}
	return netip.Prefix{}, false
}

// hostPort writes host:port, bracketing IPv6 addresses.
func hostPort(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
