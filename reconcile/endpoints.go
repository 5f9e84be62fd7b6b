package reconcile

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/httplog"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/securemetrics"
)

// Endpoints are the addresses of the reconciler's HTTP endpoints; "" or
// "0" serves nothing on one.
type Endpoints struct {
	// Health serves /healthz and /readyz.
	Health string
	// Metrics serves Prometheus metrics on /metrics.
	Metrics string
	// MetricsAuth, when set, serves Metrics over TLS and only to callers
	// it authenticates and authorizes (securemetrics.Guard); nil serves plain
	// HTTP to anyone, for an address on loopback.
	MetricsAuth *rest.Config
	// MetricsCertDir holds the TLS certificate (tls.crt, tls.key) for
	// MetricsAuth; "" makes a self-signed one at start.
	MetricsCertDir string
	// Pprof serves Go's /debug/pprof.
	Pprof string
}

// The check of /metrics callers (securemetrics.Guard) asks the API server:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// cacheSyncCheck is how long /readyz waits for the informer caches to
// report synced: they answer at once when they are, and a probe must be
// answered (with 503) rather than time out when they are not.
const cacheSyncCheck = 100 * time.Millisecond

// endpoints serves the reconciler's HTTP endpoints for the process's
// whole life, across the managers Run builds one after another. A
// manager's own servers would change hands at every lost lease: the old
// manager shuts them down only after its Start has returned, so between
// managers nothing would answer the probes, and the next manager could
// find a port still taken and exit.
type endpoints struct {
	servers []*http.Server
	// stop ends what serving needs beside the servers: the watch of the
	// metrics certificate.
	stop context.CancelFunc
}

// serveEndpoints listens on every address of e, /readyz answering what
// ready says, and serves until close.
func serveEndpoints(e Endpoints, ready *readiness) (*endpoints, error) {
	ctx, stop := context.WithCancel(context.Background())
	served := &endpoints{stop: stop}
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	health.HandleFunc("/readyz", ready.serve)
	metricsMux := http.NewServeMux()
	// controller-runtime's registry: its reconcile and workqueue metrics
	// and client-go's request metrics.
	metricsMux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	var metrics http.Handler = metricsMux
	var metricsTLS *tls.Config
	if e.MetricsAuth != nil && e.Metrics != "" && e.Metrics != "0" {
		var err error
		if metrics, metricsTLS, err = securemetrics.Guard(ctx, metricsMux, e.MetricsAuth, e.MetricsCertDir, ctrl.Log.WithName("metrics")); err != nil {
			stop()
			return nil, err
		}
	}
	profiles := http.NewServeMux()
	profiles.HandleFunc("/debug/pprof/", pprof.Index)
	profiles.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	profiles.HandleFunc("/debug/pprof/profile", pprof.Profile)
	profiles.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	profiles.HandleFunc("/debug/pprof/trace", pprof.Trace)
	for _, s := range []struct {
		flag, addr string
		handler    http.Handler
		tls        *tls.Config
	}{{"--health-addr", e.Health, health, nil}, {"--metrics-addr", e.Metrics, metrics, metricsTLS}, {"--pprof-addr", e.Pprof, profiles, nil}} {
		if s.addr == "" || s.addr == "0" {
			continue
		}
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			served.close()
			return nil, fmt.Errorf("%s %s: %w", s.flag, s.addr, err)
		}
		if s.tls != nil {
			ln = tls.NewListener(ln, s.tls)
		}
		srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second, ErrorLog: httplog.ErrorLog(ctrl.Log.WithName("http").WithValues("flag", s.flag))}
		served.servers = append(served.servers, srv)
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				ctrl.Log.WithName("run").Error(err, "an endpoint stopped serving", "flag", s.flag, "addr", s.addr)
			}
		}()
	}
	return served, nil
}

// close stops serving, letting requests in flight finish for a second.
func (e *endpoints) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, srv := range e.servers {
		_ = srv.Shutdown(ctx)
	}
	e.stop()
}

// readiness is what /readyz answers: 503 "waiting for …" saying what the
// reconciler waits for, or 200 once a manager runs, its informer caches
// have synced and its requests reach the API server (with leader
// election, those of the lease; without, all of them). Run says which
// manager runs, or what it waits for between them.
type readiness struct {
	host string
	// heard hears whether requests reach the API server; nil hears none.
	heard *contact
	// silence is how long those requests may fail before the reconciler
	// is not ready: the renew deadline, after which a leader stops
	// leading too.
	silence time.Duration

	mu sync.Mutex
	// waitingFor is what Run waits for between managers; "" while one runs.
	waitingFor string
	// cache is the running manager's.
	cache cache.Cache
}

func newReadiness(host string, heard *contact, silence time.Duration) *readiness {
	return &readiness{host: host, heard: heard, silence: silence, waitingFor: "the API server at " + host}
}

// waitFor says what Run waits for, with no manager running.
func (r *readiness) waitFor(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waitingFor, r.cache = what, nil
}

// running says that a manager runs with cache. Run has just seen the API
// server answer, so the failures of an earlier manager's requests are
// forgotten.
func (r *readiness) running(c cache.Cache) {
	r.mu.Lock()
	r.waitingFor, r.cache = "", c
	r.mu.Unlock()
	if r.heard != nil {
		r.heard.record(nil)
	}
}

// check is "" when ready, else what the reconciler waits for.
func (r *readiness) check(ctx context.Context) string {
	r.mu.Lock()
	waiting, c := r.waitingFor, r.cache
	r.mu.Unlock()
	if waiting != "" {
		return waiting
	}
	ctx, cancel := context.WithTimeout(ctx, cacheSyncCheck)
	defer cancel()
	if !c.WaitForCacheSync(ctx) {
		return "the API server at " + r.host + " to fill the informer caches"
	}
	// A manager that does not lead (a standby, or one campaigning again,
	// or any without leader election) would otherwise answer ready through
	// an outage: nothing of it stops when the API server goes away, and
	// its caches stay synced.
	if r.heard != nil {
		if since, err := r.heard.failing(); !since.IsZero() && time.Since(since) > r.silence {
			return fmt.Sprintf("the API server at %s: %s have failed for %s: %v",
				r.host, r.heard.of, time.Since(since).Round(time.Second), err)
		}
	}
	return ""
}

func (r *readiness) serve(w http.ResponseWriter, req *http.Request) {
	if waiting := r.check(req.Context()); waiting != "" {
		http.Error(w, "waiting for "+waiting, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// contact records whether requests reach the API server: since when
// they have failed, if they do.
type contact struct {
	// of names the requests heard, for /readyz.
	of string

	mu sync.Mutex
	// failingSince is the first failure after the last answer; zero
	// while they are answered.
	failingSince time.Time
	err          error
}

// record notes a request's outcome: an error that the API server sent
// (the Lease not found, a conflicting update) is an answer too.
func (c *contact) record(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		c.failingSince, c.err = time.Time{}, nil
	case c.failingSince.IsZero():
		c.failingSince, c.err = time.Now(), err
	default:
		c.err = err
	}
}

// failing is since when requests have failed (zero if they have not),
// and the last error.
func (c *contact) failing() (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failingSince, c.err
}

// contactLock is a leader election lock that records in contact whether
// its requests reach the API server. The elector asks every retry period,
// leader and standby alike: the reconciler's heartbeat with the API
// server, at no request of its own.
type contactLock struct {
	resourcelock.Interface
	contact *contact
}

func (l contactLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.Interface.Get(ctx)
	l.contact.record(err)
	return record, raw, err
}

func (l contactLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.contact.record(err)
	return err
}

func (l contactLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.contact.record(err)
	return err
}

// contactTransport records in contact whether each request reached the
// API server: without leader election nothing else asks it at rest, and
// when it goes away every informer's watch breaks and its lists, retried,
// fail. A request its caller gave up on tells nothing.
type contactTransport struct {
	next    http.RoundTripper
	contact *contact
}

func (t contactTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil || req.Context().Err() == nil {
		t.contact.record(err)
	}
	return resp, err
}
