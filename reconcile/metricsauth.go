package reconcile

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// guardMetrics serves metrics to those the API server lets read them: the
// bearer token of each request is checked with a TokenReview, and its
// identity must be allowed `get` on the non-resource URL /metrics (a
// SubjectAccessReview), both cached as controller-runtime's filter does
// (a token for a minute, an answer for up to five). The counts name
// GitSyncs and tell how busy the cluster is, and any pod that can reach
// the reconciler's address could read them otherwise.
//
// The listener speaks TLS only, so the token does not cross the network
// in the clear: with the certificate and key in certDir (tls.crt and
// tls.key, reloaded when they change, as a cert-manager Secret mounted
// there gives them), or else with a self-signed certificate made at start,
// which scrapers accept by skipping verification. Callers are allowed by
// the ClusterRole agentsandbox-metrics-reader (config/rbac). The watch of
// certDir lasts until ctx ends.
func guardMetrics(ctx context.Context, metrics http.Handler, cfg *rest.Config, certDir string) (http.Handler, *tls.Config, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to build the client that checks /metrics callers: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, httpClient)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to build the check of /metrics callers: %w", err)
	}
	guarded, err := filter(ctrl.Log.WithName("metrics"), metrics)
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
			ctrl.Log.WithName("metrics").Error(err, "stopped watching the metrics certificate", "dir", certDir)
		}
	}()
	config.GetCertificate = watcher.GetCertificate
	return guarded, config, nil
}
