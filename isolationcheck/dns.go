package isolationcheck

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/agentsandbox/terraform-provider-agentsandbox/isolationcheck/probe"
)

// dnsProbe is the DNS row's name.
const dnsProbe = "DNS for a name no rule allows"

// dnsChannelFix is what to do about a resolver the template lets the
// sandbox ask.
const dnsChannelFix = "a resolver that forwards what it cannot answer carries data out in the names it is asked, past every egress rule: " +
	"leave network.clusterDNS off for untrusted code (hosts rules and endpoints resolve at the egress gateway; a service rule's Service is in the pod's /etc/hosts)"

// dnsDenyFix is what to fix for a resolver that answered a sandbox whose
// template allows no DNS.
const dnsDenyFix = "the template allows no DNS, yet a resolver answered: the NetworkPolicy enforcer let the query through, " +
	"or the resolver is one the policy does not cover (a node-local DNS cache, a CNI's DNS proxy); block it for the sandboxes' pods"

// dnsRow asks, from sandbox a, every resolver it could ask (its
// resolv.conf's, the cluster's usual DNS address and --resolver's) for a
// name no rule allows, and judges the answers.
func (c *check) dnsRow(ctx context.Context) Row {
	var result probe.DNSResult
	if err := c.runJSON(ctx, c.a, &result, append([]string{"dns", "--timeout=2s"}, c.opts.Resolvers...)...); err != nil {
		return Row{Probe: dnsProbe, Expected: "no answer", Observed: err.Error(), Result: NotRun, Fix: "see the error"}
	}
	return c.judgeDNS(result)
}

// judgeDNS: an answer to a sandbox whose template allows no DNS is an
// escape; where it allows cluster DNS (or a cidr rule allows the
// resolver), a note that says what the answer means.
func (c *check) judgeDNS(r probe.DNSResult) Row {
	var answered, silent []string
	clusterDNS := c.template.Spec.Network.AllowsClusterDNS()
	allowed := clusterDNS
	for _, a := range r.Answers {
		if a.Result != probe.Answered {
			silent = append(silent, a.Server+" "+a.Result)
			continue
		}
		answered = append(answered, fmt.Sprintf("%s answered %s", a.Server, a.Rcode))
		allowed = allowed || c.allowed(a.Server)
	}
	if len(answered) == 0 {
		observed := "no resolver configured"
		if len(silent) > 0 {
			observed = "none answered: " + strings.Join(silent, ", ")
		}
		// An unreadable resolv.conf is no proof that none is configured.
		if len(r.Problems) > 0 {
			observed += "; " + strings.Join(r.Problems, "; ")
		}
		if clusterDNS {
			return Row{Probe: dnsProbe, Expected: "answers (the template allows cluster DNS)", Observed: observed, Result: Note}
		}
		return judge(dnsProbe, "no answer", observed, true, "")
	}
	observed := strings.Join(answered, ", ") + " for " + r.Name
	if allowed {
		return Row{Probe: dnsProbe, Expected: "answers (the template allows it)", Observed: observed, Result: Note, Fix: dnsChannelFix}
	}
	return judge(dnsProbe, "no answer", observed, false, dnsDenyFix)
}

// resolverAddresses reads Options.Resolvers: IP addresses, port 53 unless
// one is given. A name would need DNS inside the sandbox to be tried.
func resolverAddresses(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, r := range in {
		if ip, err := netip.ParseAddr(r); err == nil {
			out = append(out, net.JoinHostPort(ip.String(), "53"))
			continue
		}
		if ap, err := netip.ParseAddrPort(r); err == nil {
			out = append(out, ap.String())
			continue
		}
		return nil, fmt.Errorf("resolver %q: want an IP address, with a port after a colon when it is not 53 (169.254.20.10, [fd00::a]:5353)", r)
	}
	return out, nil
}
