package isolationcheck

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/agentsandbox/terraform-provider-agentsandbox/isolationcheck/probe"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// icmpProbe is the ICMP row's name.
const icmpProbe = "ICMP echo"

// icmpFix is what to fix for an echo answered past the policy.
const icmpFix = "the NetworkPolicy enforcer let ICMP through, and an echo carries data as well as any packet: " +
	"use an enforcer that drops what the policy does not allow, whatever its protocol (under runc the pods' " +
	"net.ipv4.ping_group_range keeps them from opening ICMP sockets; gVisor ignores it)"

// icmpRow sends, from sandbox a, an echo request to the node, to the other
// sandbox and to each --unreachable address given as an IPv4 address,
// and judges the replies.
func (c *check) icmpRow(ctx context.Context, node string) Row {
	targets := []string{node}
	targets = append(targets, c.b.facts.IPv4...)
	for _, u := range c.opts.Unreachable {
		if host, _, err := net.SplitHostPort(u); err == nil {
			if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() && !slices.Contains(targets, host) {
				targets = append(targets, host)
			}
		}
	}
	var result probe.ICMPResult
	if err := c.runJSON(ctx, c.a, &result, append([]string{"icmp", "--timeout=2s"}, targets...)...); err != nil {
		return Row{Probe: icmpProbe, Expected: "no reply", Observed: err.Error(), Result: NotRun, Fix: "see the error"}
	}
	return c.judgeICMP(result)
}

// judgeICMP: no ICMP socket, or no reply, held; a reply from an address
// no cidr rule of every port allows is an escape, from one it allows a
// note.
func (c *check) judgeICMP(r probe.ICMPResult) Row {
	if r.Socket != "" {
		observed := "no ICMP socket (" + r.Socket + ")"
		if r.Socket == "EACCES" {
			observed = "no ICMP socket: the sandbox's group is outside net.ipv4.ping_group_range (EACCES)"
		}
		return judge(icmpProbe, "no reply", observed, true, "")
	}
	var replied, silent []string
	allowed := true
	for _, e := range r.Echoes {
		if e.Result != probe.Replied {
			outcome := e.Address + " " + e.Result
			if e.Detail != "" {
				outcome += " (" + e.Detail + ")"
			}
			silent = append(silent, outcome)
			continue
		}
		replied = append(replied, e.Address)
		addr, err := netip.ParseAddr(e.Address)
		allowed = allowed && err == nil && environment.ICMPAllows(c.template.Spec.Network, environment.DefaultBlockedEgress, addr)
	}
	if len(replied) == 0 {
		return judge(icmpProbe, "no reply", "no reply: "+strings.Join(silent, ", "), true, "")
	}
	observed := "replies from " + strings.Join(replied, ", ")
	if allowed {
		return Row{Probe: icmpProbe, Expected: "replies (a cidr rule of every port allows ICMP there)", Observed: observed, Result: Note}
	}
	return judge(icmpProbe, "no reply", observed, false, icmpFix)
}
