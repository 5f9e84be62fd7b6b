// Package gateway is the egress gateway of Agent Sandbox: the HTTP forward
// proxy sandboxes use as HTTPS_PROXY and HTTP_PROXY, and the credential
// broker behind their endpoints.
//
// A sandbox's NetworkPolicy lets it reach the gateway and nothing else it
// has not been given by address, so the gateway is where egress can be
// allowed by host name: it finds the sandbox behind each connection's source
// address, checks the host against the template's hosts rules, resolves the
// name itself and refuses answers in private, metadata and cluster ranges
// (the DNS rebinding a name-only check would let through), and only then
// connects. Endpoints go further: the sandbox calls
// /endpoints/NAME on the gateway in plain HTTP, and the gateway forwards to
// the platform team's upstream with an API key from a Secret the sandbox
// cannot read, masking the key wherever the upstream echoes it back.
//
// Every refusal answers with a sentence starting "agentsandbox egress
// gateway: " that says what was refused and what would allow it, because it
// is what a user sees in pip's or curl's output.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// Client is a sandbox as the gateway knows it.
type Client struct {
	Sandbox string      // the Sandbox's name (or a warm pool member's namespace), for logs
	Owner   string      // the sandbox owner's identity, for logs
	Network *v1.Network // its template's network: hosts, cidr rules, endpoints
}

// Directory finds the sandbox behind a connection's source address.
type Directory interface {
	Client(addr netip.Addr) (Client, bool)
}

// Secrets reads an endpoint credential's value. Called per request: the
// implementation caches (rotation must take effect without restarting
// anything).
type Secrets interface {
	Credential(ctx context.Context, ref v1.SecretKeyReference) ([]byte, error)
}

// Resolver resolves host names; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config is what New needs to build a Gateway.
type Config struct {
	Directory Directory
	Secrets   Secrets
	Resolver  Resolver // net.DefaultResolver when nil
	// Blocked are the ranges a host name may not resolve into and an IP
	// literal may not be, unless a cidr rule of the client allows that
	// address and port. Used as given: the command passes private,
	// loopback, link-local (metadata), CGNAT, the cluster's ranges… The
	// unspecified addresses (0.0.0.0, ::) are always added: a connection
	// to them reaches the gateway's own host.
	Blocked     []netip.Prefix
	UpstreamTLS *tls.Config   // for endpoints' https upstreams (tests give RootCAs); nil = system roots, always verified
	DialTimeout time.Duration // default 10s
	// Recheck is how often an open tunnel, or a request whose answer is
	// still arriving, is checked against its sandbox's rules as they are
	// now; one they no longer allow (the host or endpoint dropped from the
	// template, the sandbox gone) is cut. Default 10s.
	Recheck time.Duration
	Log     logr.Logger
	Metrics prometheus.Registerer // optional
}

// Gateway is the egress gateway's HTTP handler. Serve it from an
// http.Server without a WriteTimeout: endpoint responses may stream for
// minutes, and tunnels take over their connection (hijacked connections
// have no deadlines).
type Gateway struct {
	directory Directory
	secrets   Secrets
	resolver  Resolver
	blocked   []netip.Prefix
	// dialTimeout bounds each resolution and each connection attempt.
	dialTimeout time.Duration
	// recheck is how often an open tunnel's or request's rules are
	// checked again.
	recheck time.Duration
	// dial opens upstream connections; a field so the tests can reach the
	// addresses of private ranges on loopback.
	dial    func(ctx context.Context, network, address string) (net.Conn, error)
	log     logr.Logger
	metrics metrics
	// forwarder carries plain HTTP proxy requests; endpoint requests get a
	// proxy of their own each (see serveEndpoint).
	forwarder *httputil.ReverseProxy
	// endpointTransport is shared by every endpoint so upstream
	// connections are kept alive across requests and sandboxes: endpoint
	// URLs are the platform team's, the same for every sandbox allowed
	// them.
	endpointTransport *http.Transport
}

// unspecified are the addresses New adds to Blocked.
var unspecified = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/32"), netip.MustParsePrefix("::/128")}

// New builds a Gateway from cfg, registering its metrics with
// cfg.Metrics when set.
func New(cfg Config) (*Gateway, error) {
	if cfg.Directory == nil {
		return nil, errors.New("gateway: a Directory is required")
	}
	if cfg.Secrets == nil {
		return nil, errors.New("gateway: Secrets are required to read endpoint credentials")
	}
	if cfg.UpstreamTLS != nil && cfg.UpstreamTLS.InsecureSkipVerify {
		return nil, errors.New("gateway: UpstreamTLS must verify certificates: an unverified upstream could read the credentials the gateway adds")
	}
	g := &Gateway{
		directory:   cfg.Directory,
		secrets:     cfg.Secrets,
		resolver:    cfg.Resolver,
		dialTimeout: cfg.DialTimeout,
		recheck:     cfg.Recheck,
		log:         cfg.Log,
		metrics:     newMetrics(),
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.dialTimeout <= 0 {
		g.dialTimeout = 10 * time.Second
	}
	if g.recheck <= 0 {
		g.recheck = 10 * time.Second
	}
	for _, p := range slices.Concat(cfg.Blocked, unspecified) {
		g.blocked = append(g.blocked, p.Masked())
	}
	if cfg.Metrics != nil {
		if err := g.metrics.register(cfg.Metrics); err != nil {
			return nil, err
		}
	}
	g.dial = (&net.Dialer{Timeout: g.dialTimeout}).DialContext
	g.forwarder = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The inbound request is in absolute form; the upstream gets
			// the Host of the URL it is asked for.
			pr.Out.Host = ""
		},
		// One connection per request: a pooled connection was dialled
		// after one sandbox's checks and would skip another's.
		Transport:    &http.Transport{DialContext: g.dialForSandbox, DisableKeepAlives: true},
		ErrorHandler: g.forwardError,
	}
	var upstreamTLS *tls.Config
	if cfg.UpstreamTLS != nil {
		upstreamTLS = cfg.UpstreamTLS.Clone()
	}
	g.endpointTransport = &http.Transport{
		DialContext:         g.dialEndpoint,
		TLSClientConfig:     upstreamTLS,
		TLSHandshakeTimeout: g.dialTimeout,
		ForceAttemptHTTP2:   true,
		// Many sandboxes call the same few upstreams at once: keep more
		// idle connections to each than the default two.
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	return g, nil
}

// ServeHTTP serves health probes, CONNECT tunnels, plain HTTP proxy
// requests and endpoint requests, each for the sandbox behind the
// request's source address.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isHealthProbe(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
		return
	}
	rec := g.begin(r)
	defer g.finish(rec)
	known := false
	if rec.source.IsValid() {
		rec.client, known = g.directory.Client(rec.source)
	}
	if !known {
		g.refuse(w, r, rec, refusef(http.StatusForbidden, reasonUnknownSource,
			"%s is not a sandbox this gateway knows; only sandbox pods, from their own address, may use it", rec.source))
		return
	}
	if rec.client.Network == nil {
		rec.client.Network = &v1.Network{}
	}
	switch rec.kind {
	case kindConnect:
		g.serveConnect(w, r, rec)
	case kindEndpoint:
		g.serveEndpoint(w, r, rec)
	default:
		if r.URL.IsAbs() {
			g.serveForward(w, r, rec)
			return
		}
		g.refuse(w, r, rec, refusef(http.StatusBadRequest, reasonNotProxyRequest,
			"this is an HTTP(S) proxy: send http:// and https:// requests through it (HTTP_PROXY, HTTPS_PROXY), "+
				"or call a declared endpoint at %sNAME/...", endpointsPrefix))
	}
}

// isHealthProbe tells a kubelet probe (GET /healthz, origin form) from a
// proxy request for some host's /healthz.
func isHealthProbe(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && !r.URL.IsAbs() && r.URL.Path == "/healthz"
}

// requestKind names the three things the gateway does, as logs and
// metrics say them.
func requestKind(r *http.Request) string {
	switch {
	case r.Method == http.MethodConnect:
		return kindConnect
	case !r.URL.IsAbs() && strings.HasPrefix(r.URL.Path, endpointsPrefix):
		return kindEndpoint
	default:
		return kindHTTP
	}
}

// sourceAddr is the request's source address; IPv4-mapped IPv6 sources
// (a dual-stack listener) are looked up as IPv4.
func sourceAddr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}
