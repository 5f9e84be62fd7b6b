// Command agentsandbox-gateway is the egress gateway (package gateway): the
// HTTP(S) proxy through which sandboxes reach the hosts their templates
// allow by name, and the endpoints whose credentials it adds. config/gateway
// runs two replicas of it behind one Service; the reconciler points
// sandboxes at that Service and lets their NetworkPolicy reach nothing else
// of the gateway's kind.
//
// It serves the proxy on --listen, /healthz and /readyz on --health-addr
// (ready once it knows the cluster's sandboxes) and Prometheus metrics on
// --metrics-addr: by default over TLS and only to callers the API server
// authenticates and allows to get /metrics (package securemetrics), as the
// reconciler serves its own. On SIGTERM it stops taking connections and
// exits; open tunnels end with it and their clients connect again, to the
// other replica.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gateway"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gateway/cluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/httplog"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/securemetrics"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/version"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// neverRouted are the ranges no name should resolve into for a sandbox,
// beside the private and metadata ranges broad egress rules never open
// (environment.DefaultBlockedEgress): this host, this network, multicast
// and the reserved block. (The gateway itself adds the unspecified
// addresses, 0.0.0.0 and ::.)
var neverRouted = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("ff00::/8"),
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "agentsandbox-gateway:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", ":3128", "address the proxy serves sandboxes on")
	healthAddr := flag.String("health-addr", ":8081", "address of /healthz and /readyz")
	metricsAddr := flag.String("metrics-addr", ":9090", `address of the Prometheus metrics ("0" disables them)`)
	metricsSecure := flag.Bool("metrics-secure", true, securemetrics.SecureFlagUsage)
	metricsCertDir := flag.String("metrics-cert-dir", "", securemetrics.CertDirFlagUsage)
	dnsServer := flag.String("dns-server", "", "host:port of the DNS server to resolve hosts with; the pod's resolver when empty")
	caFile := flag.String("upstream-ca-file", "", "PEM certificates an endpoint's https upstream may be signed by, beside the system's (a self-hosted model behind a private CA)")
	secretTTL := flag.Duration("secret-ttl", 10*time.Second, "how long an endpoint credential read from its Secret is used before it is read again (a rotation takes effect within it)")
	var blocked prefixes
	flag.Var(&blocked, "blocked-cidr", "a range, beside the private, loopback, link-local and metadata ones, that no host name may resolve into unless a cidr rule allows it (the cluster's pod and service ranges when they are public); repeatable")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	ctrlconfig.RegisterFlags(flag.CommandLine) // --kubeconfig
	flag.Parse()
	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)
	klog.SetLogger(log) // client-go's lines as JSON too, not klog's text
	if err := securemetrics.CheckFlags(*metricsSecure, *metricsCertDir); err != nil {
		return err
	}

	upstreamTLS, err := upstreamTLS(*caFile)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("failed to load cluster credentials: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	log.Info("starting egress gateway", "version", version.Version, "commit", version.Commit(), "listen", *listen)

	var ready atomic.Bool
	health := &http.Server{Addr: *healthAddr, Handler: healthHandler(&ready), ReadHeaderTimeout: 5 * time.Second, ErrorLog: httplog.ErrorLog(log.WithName("health"))}
	go serve(log, "health", health)
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if *metricsAddr != "0" {
		auth := cfg
		if !*metricsSecure {
			auth = nil
		}
		if err := serveMetrics(ctx, log.WithName("metrics"), *metricsAddr, registry, auth, *metricsCertDir); err != nil {
			return err
		}
	}

	directory, err := cluster.NewDirectory(ctx, cfg)
	if err != nil {
		return err
	}
	reader, err := client.New(cfg, client.Options{Scheme: kubescheme.Scheme})
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Config{
		Directory:   directory,
		Secrets:     cluster.NewSecrets(reader, *secretTTL),
		Resolver:    resolver(*dnsServer),
		UpstreamTLS: upstreamTLS,
		Blocked:     append(append(append([]netip.Prefix(nil), environment.DefaultBlockedEgress...), neverRouted...), blocked...),
		Log:         log.WithName("egress"),
		Metrics:     registry,
	})
	if err != nil {
		return err
	}
	proxy := &http.Server{Addr: *listen, Handler: gw, ReadHeaderTimeout: 30 * time.Second, ErrorLog: httplog.ErrorLog(log.WithName("proxy"))}
	errs := make(chan error, 1)
	go func() { errs <- proxy.ListenAndServe() }()
	ready.Store(true)
	log.Info("egress gateway ready")
	select {
	case err := <-errs:
		return fmt.Errorf("proxy on %s: %w", *listen, err)
	case <-ctx.Done():
	}
	// Not ready first, so the Service stops sending new connections here.
	ready.Store(false)
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = proxy.Shutdown(shutdown)
	return nil
}

// serveMetrics serves registry's metrics on addr until ctx ends: over TLS
// to the callers auth's API server allows (securemetrics.Guard), or in
// plain HTTP to anyone when auth is nil. The address is taken before it
// returns, so a port in use fails the start.
func serveMetrics(ctx context.Context, log logr.Logger, addr string, registry *prometheus.Registry, auth *rest.Config, certDir string) error {
	handler := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	var config *tls.Config
	if auth != nil {
		var err error
		if handler, config, err = securemetrics.Guard(ctx, handler, auth, certDir, log); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	if config != nil {
		ln = tls.NewListener(ln, config)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ErrorLog: httplog.ErrorLog(log)}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "server stopped", "address", addr)
		}
	}()
	return nil
}

func serve(log logr.Logger, name string, s *http.Server) {
	if err := s.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "server stopped", "server", name, "address", s.Addr)
	}
}

// healthHandler answers /healthz while the process runs and /readyz once
// it knows the cluster's sandboxes and until it shuts down.
func healthHandler(ready *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// upstreamTLS trusts the system's roots and those of caFile, if any.
func upstreamTLS(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--upstream-ca-file: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--upstream-ca-file %s holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// resolver asks server (host:port) when set, else the pod's resolver.
func resolver(server string) *net.Resolver {
	if server == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// prefixes is a repeatable flag of CIDRs.
type prefixes []netip.Prefix

func (p *prefixes) String() string {
	var out []string
	for _, x := range *p {
		out = append(out, x.String())
	}
	return strings.Join(out, ",")
}

func (p *prefixes) Set(s string) error {
	x, err := netip.ParsePrefix(s)
	if err != nil {
		return fmt.Errorf("%q is not a CIDR such as 100.100.0.0/16: %w", s, err)
	}
	*p = append(*p, x.Masked())
	return nil
}
