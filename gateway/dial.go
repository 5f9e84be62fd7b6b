package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// permit decides whether the client may reach host:port and returns the
// addresses to connect to, in the resolver's order. An IP literal needs a
// cidr rule. A name needs a hosts rule; the gateway then resolves it
// itself, never trusting the sandbox's DNS, and drops every answer in a
// blocked range that no cidr rule allows, so that a name on the allow-list
// cannot be pointed into the cluster or at the metadata server (DNS
// rebinding). A name no hosts rule names is carried to those of its
// answers a cidr rule allows, and to no other: the sandbox could reach
// them without the gateway, and its HTTPS_PROXY sends every name here.
func (g *Gateway) permit(ctx context.Context, c Client, host string, port uint16) ([]netip.Addr, *refusal) {
	if addr, err := netip.ParseAddr(host); err == nil {
		addr = addr.Unmap()
		if g.cidrAllows(c.Network, addr, port) {
			return []netip.Addr{addr}, nil
		}
		return nil, refusef(http.StatusForbidden, reasonIPLiteral,
			"IP address %s is refused: name the host instead (a template's network.egress[].hosts allows names), "+
				"or allow the address with a cidr rule (network.egress[].cidr)", hostPort(addr.String(), port))
	}
	name := normalizeName(host)
	if !validName(name) {
		return nil, refusef(http.StatusBadRequest, reasonBadTarget, "%q is not a host name", host)
	}
	if f := hostsAllow(c, name, port); f != nil {
		return g.cidrAnswers(ctx, c, name, port, f)
	}
	// Rooted: the search domains of the gateway's pod must not make a
	// public name an in-cluster one (nor cost queries for each).
	answers, err := g.lookup(ctx, name+".")
	if err != nil {
		return nil, refusef(http.StatusBadGateway, reasonUnresolvable, "%s does not resolve: %v", name, err)
	}
	var allowed []netip.Addr
	var refused []string
	for _, a := range answers {
		a = a.Unmap()
		if b, blocked := g.blockedBy(a); blocked && !g.cidrAllows(c.Network, a, port) {
			refused = append(refused, fmt.Sprintf("%s, inside %s,", a, b))
			continue
		}
		allowed = append(allowed, a)
	}
	switch {
	case len(allowed) > 0:
		return allowed, nil
	case len(refused) == 0:
		return nil, refusef(http.StatusBadGateway, reasonUnresolvable, "%s resolves to no address", name)
	default:
		return nil, refusef(http.StatusForbidden, reasonBlockedAddress,
			"%s resolves to %s which the gateway refuses unless a cidr rule allows it", name, strings.Join(refused, " and "))
	}
}

// cidrAnswers are the answers for name that a cidr rule of the client
// allows on port; refused (the hosts rules' refusal) when there are none.
// A template without cidr rules costs no lookup.
func (g *Gateway) cidrAnswers(ctx context.Context, c Client, name string, port uint16, refused *refusal) ([]netip.Addr, *refusal) {
	if !slices.ContainsFunc(c.Network.Egress, func(r v1.EgressRule) bool { return r.CIDR != "" }) {
		return nil, refused
	}
	answers, err := g.lookup(ctx, name+".")
	if err != nil {
		return nil, refused
	}
	var allowed []netip.Addr
	for _, a := range answers {
		if a = a.Unmap(); g.cidrAllows(c.Network, a, port) {
			allowed = append(allowed, a)
		}
	}
	if len(allowed) == 0 {
		return nil, refused
	}
	return allowed, nil
}

func (g *Gateway) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, g.dialTimeout)
	defer cancel()
	return g.resolver.LookupNetIP(ctx, "ip", name)
}

// stillPermitted tells whether the client now at the tunnel's (or
// forwarded request's) source may still be connected to addr for its host
// and port, as permit decided when it connected: nil if so, else why not.
// The name is not resolved again: permit checked the address connected
// to, and a name pointed elsewhere since does not move an open connection.
func (g *Gateway) stillPermitted(rec *record, addr netip.Addr) *refusal {
	ended := "the tunnel to " + hostPort(rec.host, rec.port) + " was closed"
	if rec.kind != kindConnect {
		ended = "the request to " + hostPort(rec.host, rec.port) + " was cut short"
	}
	c, known := g.directory.Client(rec.source)
	if !known {
		return refusef(http.StatusForbidden, reasonRevoked, "%s: no sandbox has address %s any more", ended, rec.source)
	}
	if c.Network == nil {
		c.Network = &v1.Network{}
	}
	if g.cidrAllows(c.Network, addr, rec.port) {
		return nil
	}
	if _, err := netip.ParseAddr(rec.host); err != nil && hostsAllow(c, normalizeName(rec.host), rec.port) == nil {
		if _, blocked := g.blockedBy(addr); !blocked {
			return nil
		}
	}
	return refusef(http.StatusForbidden, reasonRevoked, "%s: sandbox %s's egress rules no longer allow it", ended, c.Sandbox)
}

// connectChecked connects the client to host:port if permit allows it, and
// says which address it connected to. A failure to connect is a refusal
// too: the sandbox sees why.
func (g *Gateway) connectChecked(ctx context.Context, c Client, host string, port uint16) (net.Conn, netip.Addr, *refusal) {
	addrs, f := g.permit(ctx, c, host, port)
	if f != nil {
		return nil, netip.Addr{}, f
	}
	conn, addr, err := g.dialFirst(ctx, addrs, port)
	if err != nil {
		return nil, netip.Addr{}, refusef(http.StatusBadGateway, reasonUnreachable, "could not connect to %s: %v", hostPort(host, port), err)
	}
	return conn, addr, nil
}

// dialFirst connects to the first of addrs that answers, trying them in
// order, and says which it was.
func (g *Gateway) dialFirst(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, netip.Addr, error) {
	var failures []string
	for _, a := range addrs {
		conn, err := g.dial(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return conn, a, nil
		}
		failures = append(failures, err.Error())
	}
	return nil, netip.Addr{}, errors.New(strings.Join(failures, "; "))
}

// recordKey carries the record of a forwarded request to the forwarder's
// dial, which needs to know whose rules apply.
type recordKey struct{}

// dialForSandbox is the plain HTTP forwarder's dial: connectChecked for
// the sandbox whose request is being forwarded.
func (g *Gateway) dialForSandbox(ctx context.Context, _, address string) (net.Conn, error) {
	rec, ok := ctx.Value(recordKey{}).(*record)
	if !ok {
		return nil, errors.New("forwarded request without a sandbox")
	}
	host, port, f := splitHostPort(address)
	if f != nil {
		return nil, f
	}
	conn, addr, f := g.connectChecked(ctx, rec.client, host, port)
	if f != nil {
		return nil, f
	}
	rec.connected.Store(&addr)
	return conn, nil
}

// dialEndpoint connects to an endpoint's upstream. Endpoint URLs are the
// platform team's choice, not the sandbox's, so Blocked does not apply to
// them: a model served in the cluster is a fine endpoint.
func (g *Gateway) dialEndpoint(ctx context.Context, _, address string) (net.Conn, error) {
	host, port, f := splitHostPort(address)
	if f != nil {
		return nil, f
	}
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else if addrs, err = g.lookup(ctx, host); err != nil {
		return nil, err
	}
	conn, _, err := g.dialFirst(ctx, addrs, port)
	return conn, err
}

// splitHostPort splits a host:port authority, as a CONNECT names its
// target.
func splitHostPort(authority string) (string, uint16, *refusal) {
	host, p, err := net.SplitHostPort(authority)
	if err != nil {
		return "", 0, refusef(http.StatusBadRequest, reasonBadTarget, "%q is not a host:port target: %v", authority, err)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return "", 0, refusef(http.StatusBadRequest, reasonBadTarget, "%q has no valid port", authority)
	}
	return host, uint16(port), nil
}
