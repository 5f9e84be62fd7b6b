// Package securemetrics serves Prometheus metrics over TLS to the callers
// the API server vouches for, as the reconciler and the egress gateway
// both do by default. Their counts name GitSyncs, egress verdicts and how
// busy the cluster is, and any pod that can reach either address could
// read them otherwise.
package securemetrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
)

// The flags both binaries take, said once.
const (
	SecureFlagUsage  = "serve metrics over TLS to callers the API server authenticates and allows to get /metrics; false serves plain HTTP to anyone"
	CertDirFlagUsage = `directory with tls.crt and tls.key for the metrics endpoint, reloaded when they change ("" makes a self-signed certificate at start)`
)

// CheckFlags refuses a certificate directory for metrics served in plain
// HTTP, which would not use it.
func CheckFlags(secure bool, certDir string) error {
	if certDir != "" && !secure {
		return errors.New("--metrics-cert-dir is the certificate of --metrics-secure: drop it or --metrics-secure=false")
	}
	return nil
}

// Guard serves metrics to those the API server lets read them: the bearer
// token of each request is checked with a TokenReview, and its identity
// must be allowed `get` on the non-resource URL /metrics (a
// SubjectAccessReview), both cached as controller-runtime's filter does
// (a token for a minute, an answer for up to five). The identity cfg
// names must be allowed to create both reviews.
//
// The listener must speak TLS, with the config returned, so the token does
// not cross the network in the clear: with the certificate and key in
// certDir (tls.crt and tls.key, reloaded when they change, as a
// cert-manager Secret mounted there gives them), or else with a
// self-signed certificate made at start, which scrapers accept by skipping
// verification. Callers are allowed by the ClusterRole
// agentsandbox-metrics-reader (config/rbac). The watch of certDir lasts
// until ctx ends; log hears why a caller was refused.
func Guard(ctx context.Context, metrics http.Handler, cfg *rest.Config, certDir string, log logr.Logger) (http.Handler, *tls.Config, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to build the client that checks /metrics callers: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, httpClient)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to build the check of /metrics callers: %w", err)
	}
	guarded, err := filter(log, metrics)
	if err != nil {
		return nil, nil, err
	}
	// HTTP/2 is not offered (no "h2" in NextProtos): its stream resets
	// let one client keep a server busy (CVE-2023-44487), and a scrape
	// gains nothing from it.
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if certDir == "" {
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{{127, 0, 0, 1}}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to make a self-signed certificate for /metrics: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to load the self-signed certificate for /metrics: %w", err)
		}
		config.Certificates = []tls.Certificate{cert}
		return guarded, config, nil
	}
	watcher, err := certwatcher.New(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-cert-dir %s: %w", certDir, err)
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			log.Error(err, "stopped watching the metrics certificate", "dir", certDir)
		}
	}()
	config.GetCertificate = watcher.GetCertificate
	return guarded, config, nil
}
