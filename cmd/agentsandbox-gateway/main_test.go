package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/scrapetest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestMetricsAnswerOnlyCallersAllowedToReadThem serves the gateway's
// metrics as it does by default (--metrics-secure, a certificate made at
// start), asking the real API server about each caller: the answers the
// reconciler's metrics give (scrapetest.Check), and the refused plain HTTP
// request logged through the gateway's structured logger. The reviews are
// asked as a ServiceAccount with the rules of config/gateway's ClusterRole,
// under a name of the test's own (the shipped objects may be another
// test's on a shared cluster).
func TestMetricsAnswerOnlyCallersAllowedToReadThem(t *testing.T) {
	callers := scrapetest.NewCallers(t)
	gateway := gatewayRules(t, callers.Namespace, "gateway")
	var mu sync.Mutex
	var logged []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, prefix+" "+args)
	}, funcr.Options{}).WithName("metrics")
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr := testcluster.FreeAddr(t)
	if err := serveMetrics(ctx, log, addr, registry, gateway, ""); err != nil {
		t.Fatal(err)
	}
	callers.Check(t, addr, &tls.Config{InsecureSkipVerify: true}, "go_goroutines") //nolint:gosec // a certificate made at start has no issuer to verify

	testcluster.Eventually(t, "the plain HTTP request's handshake error in the log", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, line := range logged {
			if strings.HasPrefix(line, "metrics ") && strings.Contains(line, "http: TLS handshake error") {
				return true, ""
			}
		}
		return false, strings.Join(logged, "\n")
	})
}

// gatewayRules binds the rules of config/gateway's ClusterRole to the
// ServiceAccount namespace/name, and returns the cluster's config acting
// as it.
func gatewayRules(t *testing.T, namespace, name string) *rest.Config {
	t.Helper()
	cluster := testcluster.Get(t)
	ctx := context.Background()
	objs, err := config.Gateway()
	if err != nil {
		t.Fatal(err)
	}
	shipped := &rbacv1.ClusterRole{}
	for _, obj := range objs {
		if obj.GetKind() == "ClusterRole" && obj.GetName() == v1.EgressGatewayName {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, shipped); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(shipped.Rules) == 0 {
		t.Fatalf("config/gateway has no ClusterRole %s with rules", v1.EgressGatewayName)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name}, Rules: shipped.Rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := cluster.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), obj) })
	}
	return testcluster.AsServiceAccount(cluster.Config, namespace, name)
}

// Without --metrics-secure the metrics are plain HTTP to anyone, for an
// address on loopback; and the port is taken before the gateway goes on.
func TestPlainMetricsAnswerAnyone(t *testing.T) {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr := testcluster.FreeAddr(t)
	if err := serveMetrics(ctx, logr.Discard(), addr, registry, nil, ""); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("plain HTTP without a token = %d, want 200", resp.StatusCode)
	}
	if err := serveMetrics(ctx, logr.Discard(), addr, registry, nil, ""); err == nil || !strings.Contains(err.Error(), "--metrics-addr "+addr) {
		t.Errorf("a second server on %s: %v, want an error naming --metrics-addr and the address", addr, err)
	}
}
