package reconcile

import (
	"crypto/tls"
	"testing"
	"time"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/scrapetest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestMetricsAnswerOnlyCallersAllowedToReadThem serves /metrics as the
// deployed reconciler does (--metrics-secure, the default), asking the real
// API server about each caller (scrapetest.Check says what each gets):
// with a self-signed certificate made at start, and with the one in
// --metrics-cert-dir, which the client verifies. The reviews are asked as
// the reconciler's ServiceAccount, with the RBAC config/rbac grants it.
func TestMetricsAnswerOnlyCallersAllowedToReadThem(t *testing.T) {
	cluster := testcluster.Get(t)
	callers := scrapetest.NewCallers(t)
	reconciler := testcluster.AsServiceAccount(cluster.Config, v1.SystemNamespace, "agentsandbox-reconciler")
	certDir, roots := scrapetest.CertDir(t, "metrics.test")
	for _, tc := range []struct {
		name, certDir string
		// tls is how the client checks the certificate served.
		tls *tls.Config
	}{
		{"self-signed", "", &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a certificate made at start has no issuer to verify
		{"--metrics-cert-dir", certDir, &tls.Config{RootCAs: roots, ServerName: "metrics.test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := testcluster.FreeAddr(t)
			served, err := serveEndpoints(Endpoints{Metrics: addr, MetricsAuth: reconciler, MetricsCertDir: tc.certDir}, newReadiness(cluster.Config.Host, nil, time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(served.close)
			// client-go's request counts: controller-runtime's registry.
			callers.Check(t, addr, tc.tls, "rest_client_requests_total")
		})
	}
}
