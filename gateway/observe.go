package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What the gateway does, as logs and metrics name it.
const (
	kindConnect  = "connect"
	kindHTTP     = "http"
	kindEndpoint = "endpoint"
)

// Whether the gateway carried the traffic; a refusal's reason says why not.
const (
	verdictAllowed = "allowed"
	verdictRefused = "refused"
)

// record is what the gateway logs and counts of one request or tunnel,
// filled in as it is served and written out once, when it ends. It holds
// no URL (query strings may carry tokens) and no credential.
type record struct {
	start    time.Time
	source   netip.Addr
	kind     string
	client   Client
	host     string
	port     uint16
	endpoint string
	// connected is the address a forwarded request's connection went to,
	// once dialled: what its rules are checked again against (guarded).
	connected atomic.Pointer[netip.Addr]
	// up and down count body (or tunnel) bytes from the sandbox and to
	// it; a Transport reads request bodies on a goroutine of its own.
	up, down atomic.Int64
	refusal  *refusal
}

func (g *Gateway) begin(r *http.Request) *record {
	src, _ := sourceAddr(r)
	return &record{start: time.Now(), source: src, kind: requestKind(r)}
}

// finish logs and counts rec. Bytes are counted when a tunnel ends, not as
// they pass: the copy stays a splice between sockets.
func (g *Gateway) finish(rec *record) {
	verdict, reason := verdictAllowed, ""
	if rec.refusal != nil {
		verdict, reason = verdictRefused, rec.refusal.reason
	}
	up, down := rec.up.Load(), rec.down.Load()
	g.metrics.requests.WithLabelValues(rec.kind, verdict).Inc()
	g.metrics.bytes.WithLabelValues("up").Add(float64(up))
	g.metrics.bytes.WithLabelValues("down").Add(float64(down))

	kv := []any{
		"source", rec.source.String(), "sandbox", rec.client.Sandbox, "owner", rec.client.Owner,
		"kind", rec.kind, "host", rec.host, "port", rec.port,
	}
	if rec.endpoint != "" {
		kv = append(kv, "endpoint", rec.endpoint)
	}
	kv = append(kv, "bytesUp", up, "bytesDown", down, "verdict", verdict, "reason", reason,
		"duration", time.Since(rec.start))
	if rec.refusal != nil {
		kv = append(kv, "detail", rec.refusal.message)
		if rec.refusal.cause != nil {
			kv = append(kv, "error", rec.refusal.cause.Error())
		}
	}
	g.log.Info("egress", kv...)
}

// metrics are a Gateway's own collectors, so that each Gateway (each test)
// counts from zero.
type metrics struct {
	requests    *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	openTunnels prometheus.Gauge
}

func newMetrics() metrics {
	return metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentsandbox_gateway_requests_total",
			Help: "Requests and CONNECT tunnels the egress gateway handled, by kind (connect, http, endpoint) and verdict (allowed, refused).",
		}, []string{"kind", "verdict"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentsandbox_gateway_bytes_total",
			Help: "Body and tunnel bytes the egress gateway carried, up (from sandboxes) and down (to them), counted when each request or tunnel ends.",
		}, []string{"direction"}),
		openTunnels: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentsandbox_gateway_open_tunnels",
			Help: "CONNECT tunnels the egress gateway holds open.",
		}),
	}
}

func (m metrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.bytes, m.openTunnels} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("failed to register gateway metrics: %w", err)
		}
	}
	return nil
}

// countingWriter counts the body bytes a proxy writes to the sandbox.
// Unwrap lets the proxy flush (streaming) and hijack (upgrades) through it.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

func (w countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingBody counts the request body bytes read from the sandbox.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// withCountedBody has r's body counted into rec.
func withCountedBody(r *http.Request, rec *record) *http.Request {
	if r.Body != nil && r.Body != http.NoBody {
		r = r.WithContext(r.Context()) // a shallow copy, whose Body can change
		r.Body = countingBody{r.Body, &rec.up}
	}
	return r
}
