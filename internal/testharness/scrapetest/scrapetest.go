// Package scrapetest checks, against the real API server, that a /metrics
// endpoint served by securemetrics answers only the callers allowed to
// read it, as Prometheus would call it: the reconciler's and the egress
// gateway's tests share it, so both endpoints are held to the same answers.
package scrapetest

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

// readerClusterRole is the ClusterRole of config/rbac that lets an
// identity read a /metrics served securely.
const readerClusterRole = "agentsandbox-metrics-reader"

// Callers are two ServiceAccounts' tokens, in a namespace of their own:
// Reader's is bound to agentsandbox-metrics-reader, Stranger's to nothing.
type Callers struct {
	Namespace        string
	Reader, Stranger string
}

// NewCallers makes the two ServiceAccounts and waits until the API
// server's authorizer allows the reader: a guarded endpoint caches a
// refusal for 30 s, so a check made earlier would wait that long.
func NewCallers(t testing.TB) Callers {
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
	callers := Callers{Namespace: ns.Name, Reader: token("reader"), Stranger: token("stranger")}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns.Name + "-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: "reader"}},
	}
	if err := cluster.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), binding) })
	testcluster.Eventually(t, "the binding to "+readerClusterRole+" to take effect", func() (bool, string) {
		review, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + ns.Name + ":reader",
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return review.Status.Allowed, review.Status.Reason
	})
	return callers
}

// CertDir writes a self-signed certificate for serverName as tls.crt and
// tls.key into a new directory, for --metrics-cert-dir, and returns the
// pool that verifies it.
func CertDir(t testing.TB, serverName string) (string, *x509.CertPool) {
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(serverName, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return dir, roots
}

// Check scrapes https://addr/metrics with config as each kind of caller
// and wants: plain HTTP refused before any token crosses (400, no
// metrics); no token 401; a token the API server does not know 500
// (controller-runtime's filter answers so when the TokenReview says why it
// refused, and logs why); the stranger 403 naming it; the reader the
// metrics, among them the one named metric.
func (c Callers) Check(t *testing.T, addr string, config *tls.Config, metric string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: config}, Timeout: 30 * time.Second}
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
	if code, body := scrape("http", c.Reader); code != http.StatusBadRequest || strings.Contains(body, metric) {
		t.Errorf("plain HTTP with a reader's token = %d %q, want 400 and no metrics: the token must not cross in the clear", code, body)
	}
	if code, body := scrape("https", ""); code != http.StatusUnauthorized {
		t.Errorf("no token = %d %q, want 401", code, body)
	}
	if code, body := scrape("https", "not-a-token"); code != http.StatusInternalServerError || body != "Authentication failed\n" {
		t.Errorf("a token the API server does not know = %d %q, want 500 Authentication failed", code, body)
	}
	if code, body := scrape("https", c.Stranger); code != http.StatusForbidden || !strings.Contains(body, c.Namespace+":stranger") {
		t.Errorf("a ServiceAccount without %s = %d %q, want 403 naming it", readerClusterRole, code, body)
	}
	if code, body := scrape("https", c.Reader); code != http.StatusOK || !strings.Contains(body, metric) {
		t.Errorf("a ServiceAccount bound to %s = %d without %s", readerClusterRole, code, metric)
	}
}
