// Package reconciletest runs controllers against the test cluster for the
// duration of a test package, the way `agentsandbox reconcile` runs them.
package reconciletest

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
)

// ServiceAccount is the identity config/ installs the reconciler under.
const ServiceAccount = "system:serviceaccount:agentsandbox-system:agentsandbox-reconciler"

// Run starts a manager with the controllers that setup registers, runs the
// package's tests (m.Run) and stops the manager. Use it from TestMain. The
// manager runs without leader election and reconciles every object of the
// cluster, so `make test` runs one package at a time (go test -p 1): two
// reconcilers at once is not how it runs in a cluster.
func Run(m *testing.M, setup func(ctrl.Manager) error) int {
	// Errors only: a controller that cannot start its watches says why.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel), zap.StacktraceLevel(zapcore.PanicLevel)))
	cluster, err := testcluster.Connect()
	if err != nil {
		println("test cluster:", err.Error())
		return 1
	}
	// The controllers run as the reconciler's service account, with exactly
	// the RBAC config/rbac grants it, so a missing permission fails a test.
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccount, Groups: []string{
		"system:serviceaccounts", "system:serviceaccounts:agentsandbox-system", "system:authenticated",
	}}
	mgr, err := reconcile.NewManager(cfg, reconcile.ManagerOptions{
		MetricsAddr: "0", HealthAddr: "0", GracefulShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		println("manager:", err.Error())
		return 1
	}
	if err := setup(mgr); err != nil {
		println("setup:", err.Error())
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		println("manager caches did not sync")
		stop()
		return 1
	}
	code := m.Run()
	stop()
	if err := <-done; err != nil {
		println("manager:", err.Error())
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Main is TestMain for a package whose tests need controllers running.
func Main(m *testing.M, setup func(ctrl.Manager) error) {
	os.Exit(Run(m, setup))
}
