package sandboxclient_test

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// The tests run the controllers in-process and act as developers with the
// agentsandbox-user role. On the local cluster kwok serves exec,
// port-forward and logs by running host processes (hack/cluster/kwok.yaml),
// so a template's workspace mount path is a host directory of the test's.
func TestMain(m *testing.M) {
	reconciletest.Main(m, func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr, reconcile.Options{}) })
}

// user is a developer with the agentsandbox-user role, acting through the SDK.
type user struct {
	name   string
	client *sandboxclient.Client
}

// newUsers returns developers bound to agentsandbox-user for the test.
func newUsers(t *testing.T, prefixes ...string) []user {
	t.Helper()
	var users []user
	for _, d := range testcluster.Get(t).Developers(t, prefixes...) {
		c, err := sandboxclient.New(d.Config)
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, user{name: d.Name, client: c})
	}
	return users
}

// newTemplate creates a template whose workspace is a fresh host directory.
func newTemplate(t *testing.T) (*v1.SandboxTemplate, string) {
	t.Helper()
	return testcluster.Get(t).ExecTemplate(t)
}

// claim claims a Ready sandbox from the template as u and deletes it when
// the test ends.
func claim(t *testing.T, u user, opts sandboxclient.ClaimOptions) *v1.Sandbox {
	t.Helper()
	if opts.Wait == 0 {
		opts.Wait = time.Minute
	}
	sbx, err := u.client.Claim(context.Background(), opts)
	if sbx != nil {
		t.Cleanup(func() { _ = u.client.Delete(context.Background(), sbx.Name) })
	}
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return sbx
}
