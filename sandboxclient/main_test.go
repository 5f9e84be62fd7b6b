package sandboxclient_test

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// The tests run the controllers in-process and act as developers with the
// agentsandbox-user role. On the local cluster kwok serves exec,
// port-forward and logs by running host processes (hack/cluster/kwok.yaml),
// so a template's workspace mount path is a host directory of the test's.
func TestMain(m *testing.M) {
	reconciletest.Main(m, func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr) })
}

// user is a developer with the agentsandbox-user role, acting through the SDK.
type user struct {
	name   string
	client *sandboxclient.Client
}

// newUsers returns developers bound to agentsandbox-user for the test.
func newUsers(t *testing.T, prefixes ...string) []user {
	t.Helper()
	cluster := testcluster.Get(t)
	ctx := context.Background()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("sdk-users")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agentsandbox-user"},
	}
	var users []user
	for _, p := range prefixes {
		name := testcluster.Name(p) + "@example.com"
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name})
		cfg := rest.CopyConfig(cluster.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
		c, err := sandboxclient.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, user{name: name, client: c})
	}
	if err := cluster.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx, binding) })
	return users
}

// newTemplate creates a template whose workspace is a fresh host directory.
func newTemplate(t *testing.T) (*v1.SandboxTemplate, string) {
	t.Helper()
	cluster := testcluster.Get(t)
	workspace := t.TempDir()
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("sdk")},
		Spec: v1.SandboxTemplateSpec{
			Image:     "ghcr.io/acme/python-sandbox:3.12",
			Command:   []string{"sleep", "infinity"},
			Workspace: v1.Workspace{MountPath: workspace},
		},
	}
	if err := cluster.Client.Create(context.Background(), tpl); err != nil {
		t.Fatalf("create template: %v", err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), tpl) })
	return tpl, workspace
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
