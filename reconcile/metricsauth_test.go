package reconcile

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// metricsReaderClusterRole is the ClusterRole of config/rbac that lets an
// identity read the reconciler's /metrics when they are served securely.
const metricsReaderClusterRole = "agentsandbox-metrics-reader"

// TestMetricsAnswerOnlyCallersAllowedToReadThem serves /metrics as the
// deployed reconciler does (--metrics-secure, the default), asking the real
// API server about each caller: plain HTTP gets no metrics, a request
// without a token 401, one with a token it does not know 500, a ServiceAccount not bound to the
// agentsandbox-metrics-reader ClusterRole of config/rbac 403, and one bound
// to it the metrics. With a self-signed certificate made at start, and with
// the one in --metrics-cert-dir, which the client verifies.
func TestMetricsAnswerOnlyCallersAllowedToReadThem(t *testing.T) {
	cluster := testcluster.Get(t)
	ctx := context.Background()
	clientset := kubernetes.NewForConfigOrDie(cluster.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("metrics")}}
	if err := cluster.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), ns) })
	token := func(name string) string {
		t.Helper()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name}}
		if err := cluster.Client.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
		got, err := clientset.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, name, req, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns.Name + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: "scraper"}},
	}
	if err := cluster.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), binding) })
	// The reconciler caches a refusal for 30 s: ask first until the API
	// server's authorizer has seen the binding.
	testcluster.Eventually(t, "the binding to "+metricsReaderClusterRole+" to take effect", func() (bool, string) {
		review, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + ns.Name + ":scraper",
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return review.Status.Allowed, review.Status.Reason
	})

	certDir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("metrics.test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ours := x509.NewCertPool()
	ours.AppendCertsFromPEM(certPEM)

	for _, tc := range []struct {
		name, certDir string
		// tls is how the client checks the certificate served.
		tls *tls.Config
	}{
		{"self-signed", "", &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a certificate made at start has no issuer to verify
		{"--metrics-cert-dir", certDir, &tls.Config{RootCAs: ours, ServerName: "metrics.test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := testcluster.FreeAddr(t)
			served, err := serveEndpoints(Endpoints{Metrics: addr, MetricsAuth: cluster.Config, MetricsCertDir: tc.certDir}, newReadiness(cluster.Config.Host, nil, time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(served.close)
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.tls}, Timeout: 30 * time.Second}
			scrape := func(scheme, token string) (int, string) {
				t.Helper()
				req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s://%s/metrics", scheme, addr), nil)
				if err != nil {
					t.Fatal(err)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("GET %s://%s/metrics: %v", scheme, addr, err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			if code, body := scrape("http", scraper); code != http.StatusBadRequest || strings.Contains(body, "rest_client_requests_total") {
				t.Errorf("plain HTTP with a reader's token = %d %q, want 400 and no metrics: the token must not cross in the clear", code, body)
			}
			if code, body := scrape("https", ""); code != http.StatusUnauthorized {
				t.Errorf("no token = %d %q, want 401", code, body)
			}
			// controller-runtime's filter answers 500 when the TokenReview
			// says why it refused the token (and logs why), 401 when it
			// only refuses.
			if code, body := scrape("https", "not-a-token"); code != http.StatusInternalServerError || body != "Authentication failed\n" {
				t.Errorf("a token the API server does not know = %d %q, want 500 Authentication failed", code, body)
			}
			if code, body := scrape("https", stranger); code != http.StatusForbidden || !strings.Contains(body, ns.Name+":stranger") {
				t.Errorf("a ServiceAccount without %s = %d %q, want 403 naming it", metricsReaderClusterRole, code, body)
			}
			if code, body := scrape("https", scraper); code != http.StatusOK || !strings.Contains(body, "rest_client_requests_total") {
				t.Errorf("a ServiceAccount bound to %s = %d without client-go's request counts", metricsReaderClusterRole, code)
			}
		})
	}
}
