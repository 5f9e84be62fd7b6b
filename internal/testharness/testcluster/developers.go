package testcluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// Developer is a user with the agentsandbox-user role, as the tests act
// when they check what an owner, and only an owner, may do.
type Developer struct {
	// Name is the user name (what admission writes into spec.owner).
	Name string
	// Config impersonates the developer with the admin credentials.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file that does the same, for binaries.
	Kubeconfig string
}

// Developers returns one developer per prefix, with unique names, bound to
// agentsandbox-user for the duration of the test.
func (c *Cluster) Developers(t testing.TB, prefixes ...string) []Developer {
	t.Helper()
	var devs []Developer
	var subjects []rbacv1.Subject
	for _, p := range prefixes {
		d := Developer{Name: Name(p) + "@example.com", Config: rest.CopyConfig(c.Config)}
		d.Config.Impersonate = rest.ImpersonationConfig{UserName: d.Name, Groups: []string{"system:authenticated"}}
		d.Kubeconfig = c.ImpersonatingKubeconfig(t, d.Name, "system:authenticated")
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: d.Name})
		devs = append(devs, d)
	}
	c.BindUsers(t, subjects...)
	return devs
}

// BindUsers binds the subjects (users or ServiceAccounts) to
// agentsandbox-user for the duration of the test, and returns once the API
// server's authorizer says so: it learns of a binding from its own watch,
// moments after the create returned.
func (c *Cluster) BindUsers(t testing.TB, subjects ...rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: Name("sandbox-users")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agentsandbox-user"},
		Subjects:   subjects,
	}
	if err := c.Client.Create(ctx, binding); err != nil {
		t.Fatalf("bind agentsandbox-user: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), binding) })
	for _, s := range subjects {
		user, groups := s.Name, []string{"system:authenticated"}
		if s.Kind == rbacv1.ServiceAccountKind {
			user = "system:serviceaccount:" + s.Namespace + ":" + s.Name
			groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:"+s.Namespace)
		}
		Eventually(t, user+" bound to agentsandbox-user", func() (bool, string) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Group: v1.GroupVersion.Group, Resource: "sandboxtemplates"},
			}}
			if err := c.Client.Create(ctx, review); err != nil {
				return false, err.Error()
			}
			return review.Status.Allowed, "not allowed yet: " + review.Status.Reason
		})
	}
}

// Claim claims a Ready sandbox from the template as the developer, through
// the SDK, deleted when the test ends, and returns the developer's SDK
// client with it.
func (d Developer) Claim(t testing.TB, template string) (*sandboxclient.Client, *v1.Sandbox) {
	t.Helper()
	sdk, err := sandboxclient.New(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := sdk.Claim(context.Background(), sandboxclient.ClaimOptions{Template: template, Wait: time.Minute})
	if err != nil {
		t.Fatalf("claim as %s: %v", d.Name, err)
	}
	t.Cleanup(func() { _ = sdk.Delete(context.Background(), sbx.Name) })
	return sdk, sbx
}

// ServiceAccountUser is the user name the API server gives the
// ServiceAccount namespace/name.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// ServiceAccountGroups are the groups the API server puts a ServiceAccount
// of namespace in.
func ServiceAccountGroups(namespace string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// AsServiceAccount is cfg acting as the ServiceAccount namespace/name, in
// the groups the API server puts it in: what is sent with it is authorized
// with exactly the RBAC that account has, so a permission missing from
// what config/ grants fails the test.
func AsServiceAccount(cfg *rest.Config, namespace, name string) *rest.Config {
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccountUser(namespace, name), Groups: ServiceAccountGroups(namespace)}
	return as
}

// ImpersonatingKubeconfig writes a copy of the admin kubeconfig whose
// current user impersonates user in groups, for a binary to act as that
// user. It is removed when the test ends.
func (c *Cluster) ImpersonatingKubeconfig(t testing.TB, user string, groups ...string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	current := cfg.Contexts[cfg.CurrentContext]
	if current == nil || cfg.AuthInfos[current.AuthInfo] == nil {
		t.Fatalf("kubeconfig %s has no current user", c.Kubeconfig)
	}
	auth := cfg.AuthInfos[current.AuthInfo]
	auth.Impersonate, auth.ImpersonateGroups = user, groups
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// ExecTemplate creates a SandboxTemplate for tests that exec into
// sandboxes, deleted when the test ends. On the local cluster kwok runs
// exec as a process on this host (hack/cluster/kwok.yaml), so the
// template's workspace mount path is a fresh host directory, returned too:
// there the "container" finds its workspace.
func (c *Cluster) ExecTemplate(t testing.TB) (*v1.SandboxTemplate, string) {
	t.Helper()
	return c.execTemplate(t, nil)
}

// IdleTemplate is an ExecTemplate whose sandboxes stop after idle unused.
func (c *Cluster) IdleTemplate(t testing.TB, idle time.Duration) (*v1.SandboxTemplate, string) {
	t.Helper()
	return c.execTemplate(t, &v1.Lifecycle{IdleTimeout: &metav1.Duration{Duration: idle}})
}

func (c *Cluster) execTemplate(t testing.TB, lifecycle *v1.Lifecycle) (*v1.SandboxTemplate, string) {
	t.Helper()
	workspace := t.TempDir()
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: Name("exec")},
		Spec: v1.SandboxTemplateSpec{
			Image:     "ghcr.io/acme/python-sandbox:3.12",
			Command:   []string{"sleep", "infinity"},
			Workspace: v1.Workspace{MountPath: workspace},
			Lifecycle: lifecycle,
		},
	}
	if err := c.Client.Create(context.Background(), tpl); err != nil {
		t.Fatalf("create template: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), tpl) })
	return tpl, workspace
}

// WaitIdleStopped waits until the sandbox called name has stopped for
// idleness.
func (c *Cluster) WaitIdleStopped(t testing.TB, name string) {
	t.Helper()
	Eventually(t, "sandbox "+name+" stopped for idleness", func() (bool, string) {
		got := &v1.Sandbox{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, got); err != nil {
			return false, err.Error()
		}
		return got.IdleStopped() && got.Status.Phase == v1.SandboxPhaseStopped, "phase " + string(got.Status.Phase)
	})
}
