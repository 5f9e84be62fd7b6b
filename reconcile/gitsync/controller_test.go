package gitsync_test

import (
	"context"
	"flag"
	"fmt"
	eventsv1 "k8s.io/api/events/v1"
	"os"
	"path/filepath"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/gitsync"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// TestMain runs the GitSync controller alone for the tests, which write the
// status the other controllers would; a benchmark runs every controller,
// as `agentsandbox reconcile` does, since their caches and status writes
// are part of what syncing thousands of objects costs. Run benchmarks with
// -run '^$' (as make bench-gitops does): tests run beside them would meet
// controllers they do not expect.
func TestMain(m *testing.M) {
	flag.Parse()
	setup := func(mgr ctrl.Manager) error { return gitsync.NewReconciler(mgr).SetupWithManager(mgr) }
	if flag.Lookup("test.bench").Value.String() != "" {
		setup = reconcile.Controllers{}.Setup
	}
	reconciletest.Main(m, setup)
}

func poolYAML(name, extra string) string {
	return fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: %s\n%sspec:\n  runtimeHandler: runsc\n  nodeSelector:\n    agentsandbox.dev/node-group: gvisor\n", name, extra)
}

func templateYAML(name, pool, image string) string {
	return fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s\nspec:\n  image: %s\n  nodePoolRef:\n    name: %s\n", name, image, pool)
}

// newGitSync creates a GitSync of the repository that only syncs when a
// test asks (interval 1h), and removes it and what it applied afterwards.
func newGitSync(t testing.TB, url string, mutate func(*v1.GitSync)) *v1.GitSync {
	t.Helper()
	c := testcluster.Get(t).Client
	gs := &v1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("gs")}, Spec: v1.GitSyncSpec{
		URL: url, Ref: v1.GitRef{Branch: "main"}, Interval: metav1.Duration{Duration: time.Hour},
	}}
	if mutate != nil {
		mutate(gs)
	}
	if err := c.Create(context.Background(), gs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeGitSync(t, gs) })
	return gs
}

// removeGitSync suspends gs and waits until the controller saw it, so no
// sync (an interval one, say) re-creates what is deleted next: the objects
// labelled as applied by gs, one request per kind, then gs.
func removeGitSync(t testing.TB, gs *v1.GitSync) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	got := &v1.GitSync{}
	if c.Get(ctx, client.ObjectKeyFromObject(gs), got) != nil {
		return
	}
	base := got.DeepCopy()
	got.Spec.Suspend = true
	if err := c.Patch(ctx, got, client.MergeFrom(base)); err == nil {
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(gs), got)
			return err != nil || got.Status.ObservedGeneration == got.Generation, nil
		})
	}
	for _, kind := range declarations.Kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1.GroupVersion.WithKind(kind))
		// A delete of thousands of objects can end (at the API
		// server's request timeout) with some left: a benchmark's
		// 10,000 templates once left 350.
		for range 5 {
			if c.DeleteAllOf(ctx, u, client.MatchingLabels{v1.LabelGitSync: gs.Name}) == nil {
				break
			}
		}
	}
	_ = c.Delete(ctx, gs)
}

var requests atomic.Int64

// sync asks for an immediate sync and returns the GitSync once the
// controller handled the request.
func sync(t testing.TB, gs *v1.GitSync) *v1.GitSync {
	t.Helper()
	return waitHandled(t, gs, requestSync(t, gs), time.Minute)
}

// requestSync sets the reconcile-request annotation to a new token.
func requestSync(t testing.TB, gs *v1.GitSync) string {
	t.Helper()
	c := testcluster.Get(t).Client
	token := strconv.FormatInt(time.Now().UnixNano()+requests.Add(1), 10)
	cur := &v1.GitSync{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(gs), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[v1.AnnotationReconcileRequestedAt] = token
	if err := c.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
	return token
}

// waitHandled waits up to timeout for the controller to finish the sync
// the token asked for.
func waitHandled(t testing.TB, gs *v1.GitSync, token string, timeout time.Duration) *v1.GitSync {
	t.Helper()
	c := testcluster.Get(t).Client
	got := &v1.GitSync{}
	var seen string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gs), got); err != nil {
			seen = err.Error()
			return false, nil
		}
		seen = fmt.Sprintf("handled %q, conditions %v", got.Status.LastHandledReconcileAt, got.Status.Conditions)
		return got.Status.LastHandledReconcileAt == token && got.Status.ObservedGeneration == got.Generation &&
			!conditions.Has(got, v1.ReconcilingCondition), nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for the sync request %s; last seen: %s", timeout, token, seen)
	}
	return got
}

// wantReady fails unless Ready has status and reason and its message says
// every one of says.
func wantReady(t *testing.T, gs *v1.GitSync, status metav1.ConditionStatus, reason string, says ...string) {
	t.Helper()
	cond := conditions.Get(gs, v1.ReadyCondition)
	if cond == nil {
		t.Fatalf("no Ready condition: %v", gs.Status.Conditions)
	}
	if cond.Status != status || cond.Reason != reason {
		t.Fatalf("Ready = %s %s %q, want %s %s", cond.Status, cond.Reason, cond.Message, status, reason)
	}
	for _, s := range says {
		if !strings.Contains(cond.Message, s) {
			t.Errorf("Ready message %q does not say %q", cond.Message, s)
		}
	}
}

func getPool(t *testing.T, name string) (*v1.NodePool, bool) {
	t.Helper()
	p := &v1.NodePool{}
	err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: name}, p)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return p, true
}

func getTemplate(t *testing.T, name string) *v1.SandboxTemplate {
	t.Helper()
	tpl := &v1.SandboxTemplate{}
	if err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: name}, tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestSyncLifecycle follows one repository through its history: initial
// sync, changes and additions, removals pruned (or kept by annotation),
// broken revisions that change nothing, a hand edit reverted and a field
// another manager owns.
func TestSyncLifecycle(t *testing.T) {
	srv := gittest.New(t, "", "")
	poolA, poolB, poolKeep, tpl := testcluster.Name("a"), testcluster.Name("b"), testcluster.Name("keep"), testcluster.Name("t")
	c1 := srv.Commit("main", map[string]string{
		"deploy/pools.yaml":    poolYAML(poolA, ""),
		"deploy/template.yaml": templateYAML(tpl, poolA, "python:3.12"),
		"README.md":            "not a declaration",
	})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Path = "deploy" })

	t.Log("initial sync")
	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c1)
	if got.Status.LastAppliedRevision != "main@sha1:"+c1 || got.Status.LastFetchedRevision != got.Status.LastAppliedRevision {
		t.Errorf("revisions: %+v", got.Status)
	}
	wantInventory := []v1.InventoryEntry{{ID: "agentsandbox.dev_NodePool_" + poolA, Version: "v1alpha1"}, {ID: "agentsandbox.dev_SandboxTemplate_" + tpl, Version: "v1alpha1"}}
	if fmt.Sprint(got.Status.Inventory) != fmt.Sprint(wantInventory) {
		t.Errorf("inventory %v, want %v", got.Status.Inventory, wantInventory)
	}
	if _, ok := getPool(t, poolA); !ok {
		t.Fatal("pool not created")
	}
	managers := []string{}
	for _, m := range getTemplate(t, tpl).ManagedFields {
		managers = append(managers, m.Manager+"/"+string(m.Operation))
	}
	if !strings.Contains(strings.Join(managers, ","), applier.FieldManager+"/Apply") {
		t.Errorf("template managers %v, want %s applying", managers, applier.FieldManager)
	}

	t.Log("a new commit changes and adds objects")
	c2 := srv.Commit("main", map[string]string{
		"deploy/pools.yaml":    poolYAML(poolA, "") + "---\n" + poolYAML(poolB, "") + "---\n" + poolYAML(poolKeep, "  annotations:\n    agentsandbox.dev/prune: disabled\n"),
		"deploy/template.yaml": templateYAML(tpl, poolA, "python:3.13"),
	})
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c2)
	if img := getTemplate(t, tpl).Spec.Image; img != "python:3.13" {
		t.Errorf("template image %q after the change", img)
	}
	for _, p := range []string{poolB, poolKeep} {
		if _, ok := getPool(t, p); !ok {
			t.Errorf("pool %s not created", p)
		}
	}

	t.Log("removed declarations are pruned, unless annotated")
	c3 := srv.Commit("main", map[string]string{
		"deploy/pools.yaml":    poolYAML(poolA, ""),
		"deploy/template.yaml": templateYAML(tpl, poolA, "python:3.13"),
	})
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c3)
	testcluster.Eventually(t, "pool "+poolB+" pruned", func() (bool, string) {
		_, ok := getPool(t, poolB)
		return !ok, "still there"
	})
	if _, ok := getPool(t, poolKeep); !ok {
		t.Error("the pool annotated prune: disabled was pruned")
	}
	t.Cleanup(func() {
		_ = testcluster.Get(t).Client.Delete(context.Background(), &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: poolKeep}})
	})
	if len(got.Status.Inventory) != 2 {
		t.Errorf("inventory after pruning: %v", got.Status.Inventory)
	}

	t.Log("broken revisions apply nothing and prune nothing")
	broken := []struct {
		name, file, content, reason string
		says                        []string
	}{
		{"broken YAML", "deploy/pools.yaml", poolYAML(poolA, "") + "spec: [\n", v1.ReasonBuildFailed, []string{"pools.yaml, document 1", "invalid YAML"}},
		{"unknown field", "deploy/pools.yaml", poolYAML(poolA, "") + "  runtimeHandlr: runc\n", v1.ReasonBuildFailed,
			[]string{"pools.yaml, document 1", "line 9", `unknown field "spec.runtimeHandlr"`}},
		{"invalid enum", "deploy/pools.yaml", poolYAML(poolA, "") + "  taints:\n  - key: k\n    effect: Sometimes\n", v1.ReasonValidationFailed,
			[]string{"pools.yaml, document 1", "spec.taints[0].effect", `"Sometimes"`}},
		{"dangling reference", "deploy/pools.yaml", poolYAML(poolA, "") + "---\n" + templateYAML(testcluster.Name("t"), "no-such-pool", "python:3.12"),
			v1.ReasonValidationFailed, []string{"pools.yaml, document 2", `spec.nodePoolRef.name: NodePool "no-such-pool" is neither declared nor on the cluster`}},
		{"reference to a pruned object", "deploy/template.yaml", templateYAML(tpl, poolA, "python:3.13"), v1.ReasonValidationFailed,
			[]string{"template.yaml, document 1", `spec.nodePoolRef.name: NodePool "` + poolA + `" is no longer declared and would be pruned`}},
		{"unknown kind", "deploy/pools.yaml", poolYAML(poolA, "") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", v1.ReasonBuildFailed,
			[]string{"pools.yaml, document 2", `kind "ConfigMap" is not accepted`}},
	}
	for _, b := range broken {
		// Each broken commit also drops the template and changes the
		// pool's node selector: applying or pruning anything would show.
		content := strings.Replace(b.content, "node-group: gvisor", "node-group: changed", 1)
		commit := srv.Commit("main", map[string]string{b.file: content})
		got = sync(t, gs)
		wantReady(t, got, metav1.ConditionFalse, b.reason, append(b.says, "main@sha1:"+commit, "the cluster keeps revision main@sha1:"+c3)...)
		if got.Status.LastAppliedRevision != "main@sha1:"+c3 || got.Status.LastAttemptedRevision != "main@sha1:"+commit {
			t.Errorf("%s: applied %s, attempted %s", b.name, got.Status.LastAppliedRevision, got.Status.LastAttemptedRevision)
		}
		if p, _ := getPool(t, poolA); p == nil || p.Spec.NodeSelector["agentsandbox.dev/node-group"] != "gvisor" {
			t.Errorf("%s: pool changed: %+v", b.name, p)
		}
		getTemplate(t, tpl) // fails the test if pruned
		if len(got.Status.Inventory) != 2 {
			t.Errorf("%s: inventory changed: %v", b.name, got.Status.Inventory)
		}
	}

	t.Log("a fixed revision recovers")
	c4 := srv.Commit("main", map[string]string{
		"deploy/pools.yaml":    poolYAML(poolA, ""),
		"deploy/template.yaml": templateYAML(tpl, poolA, "python:3.13"),
	})
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c4)
	if conditions.Has(got, v1.StalledCondition) || conditions.Has(got, v1.ReconcilingCondition) {
		t.Errorf("conditions after recovery: %v", got.Status.Conditions)
	}

	t.Log("a hand edit is reverted on the next sync")
	admin := testcluster.Get(t).Client
	edited := getTemplate(t, tpl)
	edited.Spec.Image = "python:hand-edited"
	if err := admin.Update(context.Background(), edited, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if img := getTemplate(t, tpl).Spec.Image; img != "python:3.13" {
		t.Errorf("hand edit not reverted: image %q", img)
	}

	t.Log("a field another apply manager owns is a conflict, not a tug of war")
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": tpl},
		"spec":     map[string]any{"image": "python:from-terraform"},
	}}
	if err := admin.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(other), client.FieldOwner("terraform"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonValidationFailed, "template.yaml, document 1", "conflict", `spec.image is owned by field manager "terraform"`)
	if img := getTemplate(t, tpl).Spec.Image; img != "python:from-terraform" {
		t.Errorf("the other manager's value was overwritten: %q", img)
	}
}

func TestGitServerDownKeepsTheLastState(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("down")
	c1 := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), nil)
	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	srv.Stop()
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonFetchFailed, "connection refused", "the cluster keeps revision main@sha1:"+c1)
	if _, ok := getPool(t, pool); !ok {
		t.Error("pool gone while the Git server is down")
	}
	if len(got.Status.Inventory) != 1 {
		t.Errorf("inventory %v", got.Status.Inventory)
	}

	srv.Start()
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c1)
}

func TestSuspendAndResume(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("susp")
	c1 := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	c := testcluster.Get(t).Client
	setSuspend := func(v bool) {
		cur := &v1.GitSync{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gs), cur); err != nil {
			t.Fatal(err)
		}
		base := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Suspend = v
		if err := c.Patch(context.Background(), cur, base); err != nil {
			t.Fatal(err)
		}
	}
	setSuspend(true)
	c2 := srv.Commit("main", map[string]string{"pool.yaml": strings.Replace(poolYAML(pool, ""), "node-group: gvisor", "node-group: changed", 1)})
	got := sync(t, gs)
	if got.Status.LastAppliedRevision != "main@sha1:"+c1 || got.Status.LastFetchedRevision != "main@sha1:"+c1 {
		t.Errorf("suspended GitSync fetched or applied: %+v", got.Status)
	}
	if p, _ := getPool(t, pool); p == nil || p.Spec.NodeSelector["agentsandbox.dev/node-group"] != "gvisor" {
		t.Errorf("suspended GitSync changed the pool: %+v", p)
	}

	setSuspend(false)
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c2)
	if p, _ := getPool(t, pool); p == nil || p.Spec.NodeSelector["agentsandbox.dev/node-group"] != "changed" {
		t.Errorf("resumed GitSync did not apply: %+v", p)
	}
}

func TestCredentials(t *testing.T) {
	srv := gittest.New(t, "bot", "right-password")
	pool := testcluster.Name("auth")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	c := testcluster.Get(t).Client
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("creds"), Namespace: gitsync.DefaultSecretNamespace},
		Data: map[string][]byte{"username": []byte("bot"), "password": []byte("wrong-password")}}
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.SecretRef = &v1.LocalObjectReference{Name: secret.Name} })

	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonAuthenticationFailed, "secret "+gitsync.DefaultSecretNamespace+"/"+secret.Name+" not found")

	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), secret) })
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonFetchFailed, "authentication required")
	if strings.Contains(fmt.Sprint(got.Status), "wrong-password") {
		t.Error("status carries the password")
	}
	if _, ok := getPool(t, pool); ok {
		t.Error("pool created without access to the repository")
	}

	secret.Data["password"] = []byte("right-password")
	if err := c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if _, ok := getPool(t, pool); !ok {
		t.Error("pool not created with the right credentials")
	}
}

// TestServiceAccountLimitsTheSync syncs as a ServiceAccount that may only
// manage sandbox templates: a repository that also declares a node pool is
// refused as a whole, and applies once it declares only what the account
// may.
func TestServiceAccountLimitsTheSync(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	srv := gittest.New(t, "", "")
	tpl, pool, sa := testcluster.Name("tenant-t"), testcluster.Name("tenant-p"), testcluster.Name("tenant")
	template := fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s\nspec:\n  image: python:3.12\n", tpl)
	srv.Commit("main", map[string]string{"template.yaml": template, "pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.ServiceAccountName = sa })

	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonServiceAccountNotFound,
		"spec.serviceAccountName: ServiceAccount "+gitsync.DefaultSecretNamespace+"/"+sa+" not found")

	// The reconciler may act as the ServiceAccounts of its namespace, as
	// config/rbac installs it (the tests' reconciler already acts as its
	// own account, and one cannot act as an account twice).
	_, accounts := serviceAccountUser("")
	if ok, why := allowed(t, reconciletest.ServiceAccount, accounts, authorizationv1.ResourceAttributes{
		Namespace: gitsync.DefaultSecretNamespace, Verb: "impersonate", Resource: "serviceaccounts", Name: sa,
	}); !ok {
		t.Errorf("the reconciler may not impersonate ServiceAccount %s: %s", sa, why)
	}

	newServiceAccount(t, sa, rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"sandboxtemplates"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "delete"},
	})
	tenant, _ := serviceAccountUser(sa)
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonValidationFailed,
		"pool.yaml, document 1: failed to list NodePool", tenant, "forbidden")
	if err := c.Get(ctx, client.ObjectKey{Name: tpl}, &v1.SandboxTemplate{}); !apierrors.IsNotFound(err) {
		t.Errorf("template %s applied although the revision was refused: %v", tpl, err)
	}
	if _, ok := getPool(t, pool); ok {
		t.Errorf("node pool %s created by a ServiceAccount that may not", pool)
	}

	srv.Commit("main", map[string]string{"template.yaml": template})
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	getTemplate(t, tpl)
}

// TestServiceAccountSyncActsForItselfOnly: a GitSync acting as a
// ServiceAccount that may manage sandboxes is, for the owner admission
// policy, that account and no admin: a revision declaring a sandbox for
// alice is refused as a whole, and one without an owner makes the account
// the owner.
func TestServiceAccountSyncActsForItselfOnly(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	srv := gittest.New(t, "", "")
	sa, name := testcluster.Name("team"), testcluster.Name("team-sbx")
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("team-t")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
	if err := c.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), tpl) })
	newServiceAccount(t, sa, rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"sandboxes"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "delete"},
	}, rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"sandboxtemplates"}, Verbs: []string{"get", "list", "watch"},
	})
	sandboxYAML := func(owner string) string {
		return fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: %s\nspec:\n  templateRef: {name: %s}\n%s", name, tpl.Name, owner)
	}
	srv.Commit("main", map[string]string{"sandbox.yaml": sandboxYAML("  owner: alice@example.com\n")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.ServiceAccountName = sa })
	t.Cleanup(func() { _ = c.Delete(context.Background(), &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name}}) })
	account, _ := serviceAccountUser(sa)
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonValidationFailed,
		"sandbox.yaml, document 1", "belongs to alice@example.com, not to "+account)
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &v1.Sandbox{}); !apierrors.IsNotFound(err) {
		t.Errorf("sandbox %s for alice applied by a ServiceAccount that is no admin: %v", name, err)
	}

	srv.Commit("main", map[string]string{"sandbox.yaml": sandboxYAML("")})
	sync(t, gs)
	got := &v1.Sandbox{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatalf("the account's own sandbox: %v", err)
	}
	if got.Spec.Owner != account {
		t.Errorf("sandbox applied by %s is owned by %q", account, got.Spec.Owner)
	}
}

// TestNewServiceAccountRevalidatesEverything gives a GitSync that applied
// a node pool as the reconciler a ServiceAccount that may read node pools
// but not change them: the next sync validates the pool again, as the
// account, and is refused, rather than skipping it as unchanged.
func TestNewServiceAccountRevalidatesEverything(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	srv := gittest.New(t, "", "")
	pool, sa := testcluster.Name("reval"), testcluster.Name("reader")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	newServiceAccount(t, sa, rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"nodepools"}, Verbs: []string{"get", "list", "watch"},
	})
	cur := getGitSync(t, gs)
	base := cur.DeepCopy()
	cur.Spec.ServiceAccountName = sa
	if err := c.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonValidationFailed,
		"pool.yaml, document 1", `cannot patch resource "nodepools"`)
}

// newServiceAccount creates a ServiceAccount in the reconciler's namespace
// with a ClusterRole of rules bound to it, and waits until the authorizer
// grants the first rule's first verb.
func newServiceAccount(t *testing.T, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	c := testcluster.Get(t).Client
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gitsync.DefaultSecretNamespace}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: gitsync.DefaultSecretNamespace}},
	}
	for _, obj := range []client.Object{account, role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
	user, groups := serviceAccountUser(name)
	testcluster.Eventually(t, "the ServiceAccount's access", func() (bool, string) {
		return allowed(t, user, groups, authorizationv1.ResourceAttributes{
			Group: rules[0].APIGroups[0], Verb: rules[0].Verbs[0], Resource: rules[0].Resources[0],
		})
	})
}

// serviceAccountUser is the username and groups of a ServiceAccount of the
// reconciler's namespace, as the API server authenticates it.
func serviceAccountUser(name string) (string, []string) {
	ns := gitsync.DefaultSecretNamespace
	return "system:serviceaccount:" + ns + ":" + name, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
}

// allowed asks the API server's authorizer whether user, in groups, may do
// what attrs say.
func allowed(t *testing.T, user string, groups []string, attrs authorizationv1.ResourceAttributes) (bool, string) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups, ResourceAttributes: &attrs,
	}}
	if err := testcluster.Get(t).Client.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed, review.Status.Reason
}

func TestPruneDisabled(t *testing.T) {
	srv := gittest.New(t, "", "")
	a, b := testcluster.Name("pa"), testcluster.Name("pb")
	srv.Commit("main", map[string]string{"a.yaml": poolYAML(a, ""), "b.yaml": poolYAML(b, "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Prune = new(false) })
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	srv.Commit("main", map[string]string{"a.yaml": poolYAML(a, "")})
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if _, ok := getPool(t, b); !ok {
		t.Error("spec.prune false, yet the pool was pruned")
	}
	t.Cleanup(func() {
		_ = testcluster.Get(t).Client.Delete(context.Background(), &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: b}})
	})
}

func TestIntervalSyncsWithoutARequest(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("tick")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Interval = metav1.Duration{Duration: time.Second} })
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	c2 := srv.Commit("main", map[string]string{"pool.yaml": strings.Replace(poolYAML(pool, ""), "node-group: gvisor", "node-group: changed", 1)})
	c := testcluster.Get(t).Client
	testcluster.Eventually(t, "the next interval to apply "+c2, func() (bool, string) {
		got := &v1.GitSync{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gs), got); err != nil {
			return false, err.Error()
		}
		return got.Status.LastAppliedRevision == "main@sha1:"+c2, got.Status.LastAppliedRevision
	})
	if p, _ := getPool(t, pool); p == nil || p.Spec.NodeSelector["agentsandbox.dev/node-group"] != "changed" {
		t.Errorf("pool after the interval sync: %+v", p)
	}
}

// TestRetryIntervalRetriesAFailure: a failed sync is tried again after
// spec.retryInterval, not the hour-long interval, so a fix pushed after a
// broken revision is applied without a request.
func TestRetryIntervalRetriesAFailure(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("retry")
	srv.Commit("main", map[string]string{"pool.yaml": "kind: [NodePool\n"})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.RetryInterval = metav1.Duration{Duration: time.Second} })
	if r := conditions.Get(sync(t, gs), v1.ReadyCondition); r == nil || r.Status != metav1.ConditionFalse {
		t.Fatalf("Ready after a broken revision: %+v", r)
	}

	fixed := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	c := testcluster.Get(t).Client
	testcluster.Eventually(t, "a retry to apply "+fixed, func() (bool, string) {
		got := &v1.GitSync{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gs), got); err != nil {
			return false, err.Error()
		}
		return got.Status.LastAppliedRevision == "main@sha1:"+fixed, fmt.Sprintf("%v", got.Status.Conditions)
	})
	if _, ok := getPool(t, pool); !ok {
		t.Error("the fixed revision's pool is not on the cluster")
	}
}

// TestMetricsAndEvents: syncs are measured by result, and events are
// recorded on change and failure only, not on a resync that changes nothing.
func TestMetricsAndEvents(t *testing.T) {
	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(testcluster.Name("ev"), "")})
	gs := newGitSync(t, srv.URL(), nil)
	eventWrites := func(w reconciletest.Write) bool { return strings.Contains(w.Path, "/events") }

	since := reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	testcluster.Eventually(t, "an event for the initial sync", func() (bool, string) {
		n := len(reconciletest.Writes(since, eventWrites))
		return n > 0, fmt.Sprintf("%d event writes", n)
	})

	time.Sleep(time.Second) // let the recorder flush
	since = reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	time.Sleep(time.Second)
	if w := reconciletest.Writes(since, eventWrites); len(w) != 0 {
		t.Errorf("a no-op resync wrote events: %v", w)
	}

	srv.Stop()
	since = reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonFetchFailed)
	testcluster.Eventually(t, "a warning for the failure", func() (bool, string) {
		n := len(reconciletest.Writes(since, eventWrites))
		return n > 0, fmt.Sprintf("%d event writes", n)
	})

	counts := map[string]uint64{}
	for result, got := range syncSamples(t, gs.Name) {
		counts[result] = got.count
	}
	// Creating the GitSync may sync it once more than the two requests.
	if counts["success"] < 2 || counts["success"] > 3 || counts[v1.ReasonFetchFailed] != 1 {
		t.Errorf("sync duration sample counts by result: %v, want 2 or 3 success and 1 %s", counts, v1.ReasonFetchFailed)
	}
}

// samples are the observations of one GitSync's sync durations with one
// result.
type samples struct {
	count uint64
	sum   float64
}

// syncSamples reads agentsandbox_gitsync_duration_seconds for the GitSync
// name, by result: how many syncs ended so and how long they took in all.
func syncSamples(t testing.TB, name string) map[string]samples {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]samples{}
	for _, mf := range mfs {
		if mf.GetName() != "agentsandbox_gitsync_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] == name {
				out[labels["result"]] = samples{m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()}
			}
		}
	}
	return out
}

// waitIntervalSync waits up to timeout for the next successful sync of gs
// after one that ended with before, and returns how long that sync took.
func waitIntervalSync(t testing.TB, gs *v1.GitSync, before samples, timeout time.Duration) time.Duration {
	t.Helper()
	var now samples
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		now = syncSamples(t, gs.Name)["success"]
		return now.count > before.count, nil
	})
	if err != nil {
		t.Fatalf("no interval sync within %s (%d successful syncs so far)", timeout, now.count)
	}
	return time.Duration((now.sum - before.sum) / float64(now.count-before.count) * float64(time.Second))
}

// TestIntervalResyncWritesNothing: a resync on the interval, which no
// request asked for, of a revision nobody touched sends no write at all:
// no dry run, no apply and no status patch (nothing in the status would
// change).
func TestIntervalResyncWritesNothing(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("quiet")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Interval = metav1.Duration{Duration: time.Second} })
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	// Two interval syncs: the first may still record the memo of objects
	// the request's sync applied; the second has nothing left to do.
	waitIntervalSync(t, gs, syncSamples(t, gs.Name)["success"], time.Minute)
	since, before := reconciletest.WriteCount(), syncSamples(t, gs.Name)["success"]
	waitIntervalSync(t, gs, before, time.Minute)
	time.Sleep(200 * time.Millisecond) // the deferred status patch follows the metric
	if w := reconciletest.Writes(since, func(w reconciletest.Write) bool {
		return strings.Contains(w.Path, gs.Name) || strings.Contains(w.Path, pool)
	}); len(w) > 0 {
		t.Errorf("an interval resync of an untouched revision wrote: %v", w)
	}
}

// TestForcePushRewind: a branch force-pushed back to an older commit is a
// new revision like any other; what the newer commit added is pruned.
func TestForcePushRewind(t *testing.T) {
	srv := gittest.New(t, "", "")
	a, b := testcluster.Name("ra"), testcluster.Name("rb")
	c1 := srv.Commit("main", map[string]string{"a.yaml": poolYAML(a, "")})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, c1)
	c2 := srv.Commit("main", map[string]string{"a.yaml": poolYAML(a, ""), "b.yaml": poolYAML(b, "")})
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, c2)
	if _, ok := getPool(t, b); !ok {
		t.Fatal("pool of the second commit not created")
	}

	srv.Rewind("main", c1)
	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c1)
	testcluster.Eventually(t, "pool "+b+" pruned after the rewind", func() (bool, string) {
		_, ok := getPool(t, b)
		return !ok, "still there"
	})
	if _, ok := getPool(t, a); !ok {
		t.Error("pool of the first commit gone after the rewind")
	}
}

func TestTimeout(t *testing.T) {
	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(testcluster.Name("slow"), "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Timeout = metav1.Duration{Duration: time.Millisecond} })
	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonFetchFailed, "spec.timeout 1ms exceeded")
	if len(got.Status.Inventory) != 0 {
		t.Errorf("inventory after a timed-out sync: %v", got.Status.Inventory)
	}
}

// TestObjectMovedToAnotherGitSync: an object one GitSync's repository drops
// and another's now declares is not pruned by the first.
func TestObjectMovedToAnotherGitSync(t *testing.T) {
	first, second := gittest.New(t, "", ""), gittest.New(t, "", "")
	moved, stays := testcluster.Name("moved"), testcluster.Name("stays")
	first.Commit("main", map[string]string{"moved.yaml": poolYAML(moved, ""), "stays.yaml": poolYAML(stays, "")})
	a := newGitSync(t, first.URL(), nil)
	wantReady(t, sync(t, a), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	second.Commit("main", map[string]string{"moved.yaml": poolYAML(moved, "")})
	b := newGitSync(t, second.URL(), nil)
	wantReady(t, sync(t, b), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if p, _ := getPool(t, moved); p == nil || p.Labels[v1.LabelGitSync] != b.Name {
		t.Fatalf("moved pool not labelled with the second GitSync: %+v", p)
	}

	first.Commit("main", map[string]string{"stays.yaml": poolYAML(stays, "")})
	got := sync(t, a)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if _, ok := getPool(t, moved); !ok {
		t.Error("the first GitSync pruned a pool the second one now applies")
	}
	if len(got.Status.Inventory) != 1 {
		t.Errorf("first GitSync's inventory: %v", got.Status.Inventory)
	}
}

// TestHealthWait: a sync is Ready only once what it applied converged: a
// warm pool with all replicas ready, nothing Stalled. The test plays the
// controllers' part by writing their status.
func TestHealthWait(t *testing.T) {
	srv := gittest.New(t, "", "")
	tpl, pool := testcluster.Name("ht"), testcluster.Name("hp")
	commit := srv.Commit("main", map[string]string{
		"template.yaml": fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s\nspec:\n  image: python:3.12\n", tpl),
		"pool.yaml":     fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: WarmPool\nmetadata:\n  name: %s\nspec:\n  templateRef:\n    name: %s\n  replicas: 2\n", pool, tpl),
	})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Timeout = metav1.Duration{Duration: 2 * time.Second} })
	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonHealthCheckFailed,
		"revision main@sha1:"+commit+" applied", `WarmPool "`+pool+`": 0 of 2 members ready`, "spec.timeout 2s exceeded")
	if got.Status.LastAppliedRevision != "main@sha1:"+commit || len(got.Status.Inventory) != 2 {
		t.Errorf("an applied but unhealthy revision: %+v", got.Status)
	}

	c := testcluster.Get(t).Client
	wp := &v1.WarmPool{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: pool}, wp); err != nil {
		t.Fatal(err)
	}
	wp.Status = v1.WarmPoolStatus{ObservedGeneration: wp.Generation, Replicas: 2, ReadyReplicas: 2}
	if err := c.Status().Update(context.Background(), wp); err != nil {
		t.Fatal(err)
	}
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	tp := getTemplate(t, tpl)
	conditions.MarkStalled(tp, "InvalidImage", "image python:3.12 cannot be pulled")
	tp.Status.ObservedGeneration = tp.Generation
	if err := c.Status().Update(context.Background(), tp); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonHealthCheckFailed,
		"template.yaml, document 1", `SandboxTemplate "`+tpl+`" failed: image python:3.12 cannot be pulled`)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a Stalled object was waited on for %s", d)
	}
}

// TestExamplesGitOps syncs examples/gitops as a repository and checks that
// every object ends up exactly as a plain create of the same manifest
// would make it (provider/acc_examples_test.go proves the Terraform
// examples make the same objects as that create): the GitSync adds or
// drops nothing.
func TestExamplesGitOps(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "examples", "gitops", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/gitops: %v", err)
	}
	c := testcluster.Get(t).Client
	repo := map[string]string{}
	want := map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		repo[filepath.Base(f)] = string(data)
		objs, err := testcluster.ReadManifests(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopy()); err == nil {
				t.Fatalf("%s %s from examples/gitops already exists on the cluster; remove it first", o.GetKind(), o.GetName())
			}
			created := o.DeepCopy()
			if err := c.Create(context.Background(), created, client.DryRunAll); err != nil {
				t.Fatalf("dry-run create of %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			want[o.GetKind()+"/"+o.GetName()] = created.Object["spec"]
		}
	}
	srv := gittest.New(t, "", "")
	srv.Commit("main", repo)
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Timeout = metav1.Duration{Duration: 2 * time.Second} })
	got := sync(t, gs)
	// No warm pool controller runs here, so the pool never fills: the
	// objects are applied, the health wait says what it waited for.
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonHealthCheckFailed, "applied", "0 of 3 members ready")
	if len(got.Status.Inventory) != len(want) {
		t.Errorf("inventory %v, want %d objects", got.Status.Inventory, len(want))
	}
	for key, spec := range want {
		kind, name, _ := strings.Cut(key, "/")
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(v1.GroupVersion.WithKind(kind))
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if diff := cmp.Diff(spec, live.Object["spec"]); diff != "" {
			t.Errorf("%s: GitSync and a plain create differ (-create +gitsync):\n%s", key, diff)
		}
	}
}

// TestUnchangedRevisionIsNotCloned: when ls-remote shows the revision
// already checked out, the sync re-applies it without cloning; a new
// revision is cloned.
func TestUnchangedRevisionIsNotCloned(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("noclone")
	c1 := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	srv.RefuseFetches(true)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c1)
	c2 := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "  labels:\n    team: z\n")})
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonFetchFailed, "failed to clone", "the cluster keeps revision main@sha1:"+c1)
	srv.RefuseFetches(false)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c2)
}

// TestNoOpResyncWritesNothing: resyncing a revision nobody has touched
// sends no request but reads and its own status patch (no dry run, no
// apply), and an object changed on the cluster in between is still
// checked and put back: a spec edit (its generation moves) and a declared
// label removed (it does not).
func TestNoOpResyncWritesNothing(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool, tpl := testcluster.Name("noop"), testcluster.Name("noop")
	srv.Commit("main", map[string]string{
		"pool.yaml":     poolYAML(pool, "  labels:\n    team: z\n"),
		"template.yaml": templateYAML(tpl, pool, "python:3.13"),
	})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	since := reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	mine := reconciletest.Writes(since, func(w reconciletest.Write) bool {
		return strings.Contains(w.Path, "/nodepools/"+pool) || strings.Contains(w.Path, "/sandboxtemplates/"+tpl) ||
			strings.Contains(w.Path, "/gitsyncs/"+gs.Name) && !strings.HasSuffix(w.Path, "/status")
	})
	if len(mine) > 0 {
		t.Errorf("a no-op resync sent %d writes or dry runs: %v", len(mine), mine)
	}

	edited := getTemplate(t, tpl)
	edited.Spec.Image = "python:hand-edited"
	if err := testcluster.Get(t).Client.Update(context.Background(), edited, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if img := getTemplate(t, tpl).Spec.Image; img != "python:3.13" {
		t.Errorf("a hand edit between two syncs of one revision was not reverted: image %q", img)
	}

	unlabelled, _ := getPool(t, pool)
	delete(unlabelled.Labels, "team")
	if err := testcluster.Get(t).Client.Update(context.Background(), unlabelled, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if p, _ := getPool(t, pool); p.Labels["team"] != "z" {
		t.Errorf("a declared label removed between two syncs of one revision was not put back: labels %v", p.Labels)
	}
}

// TestSyncQueuedDuringASyncReadsItsStatus requests a sync while another
// runs, twice. The queued sync starts the moment the running one returns,
// before the cache has the status that one wrote, and must still act on
// it: not validate every object again as for a new spec (the first
// GitSync's first sync has not recorded observedGeneration yet), and prune
// from the inventory the running sync wrote, not the one before it (or
// what it added and the next revision drops is left behind for good).
func TestSyncQueuedDuringASyncReadsItsStatus(t *testing.T) {
	srv := gittest.New(t, "", "")
	prefix, dropped := testcluster.Name("queued"), testcluster.Name("dropped")
	templates := func(image string) map[string]string {
		files := map[string]string{}
		for i := range 300 {
			files[fmt.Sprintf("t%03d.yaml", i)] = fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s-%d\nspec:\n  image: %s\n", prefix, i, image)
		}
		return files
	}
	mine := func(w reconciletest.Write) bool { return strings.Contains(w.Path, "/sandboxtemplates/"+prefix+"-") }
	since := reconciletest.WriteCount()
	// requestWhileSyncing waits for the running sync's first write after
	// mark, then commits files (if any) and requests the next sync.
	requestWhileSyncing := func(gs *v1.GitSync, mark int, files map[string]string) string {
		testcluster.Eventually(t, "the running sync's first write", func() (bool, string) {
			n := len(reconciletest.Writes(mark, mine))
			return n > 0, fmt.Sprintf("%d writes", n)
		})
		if files != nil {
			srv.Commit("main", files)
		}
		return requestSync(t, gs)
	}

	srv.Commit("main", templates("python:3.12"))
	gs := newGitSync(t, srv.URL(), nil) // its creation starts the first sync
	wantReady(t, waitHandled(t, gs, requestWhileSyncing(gs, since, nil), time.Minute), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	// One dry run and one apply each by the first sync, none by the queued
	// one (a request retried after a 429 counts twice, hence no exact
	// figure): validating them again would make it 900.
	if n := len(reconciletest.Writes(since, mine)); n < 600 || n >= 900 {
		t.Errorf("%d writes to the 300 templates, want 600: one dry run and one apply each by the first sync, none by the queued one", n)
	}

	withDropped := templates("python:3.13")
	withDropped["dropped.yaml"] = "apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: " + dropped + "\nspec:\n  image: python:3.13\n"
	srv.Commit("main", withDropped)
	mark := reconciletest.WriteCount()
	requestSync(t, gs)
	wantReady(t, waitHandled(t, gs, requestWhileSyncing(gs, mark, templates("python:3.13")), time.Minute), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	tpl := &v1.SandboxTemplate{}
	err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: dropped}, tpl)
	if err == nil && tpl.DeletionTimestamp == nil {
		t.Errorf("template %s, applied by one sync and dropped by the revision the queued one applied, was not pruned", dropped)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// TestAdoptionIsRecorded: an object made with kubectl and then declared in
// Git is taken over, with a warning event naming it and saying so; the
// next sync, of an object now the GitSync's own, records none.
func TestAdoptionIsRecorded(t *testing.T) {
	c := testcluster.Get(t).Client
	ctx := context.Background()
	name := testcluster.Name("adopt")
	handmade := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodePoolSpec{
		RuntimeHandler: "runsc", NodeSelector: map[string]string{"agentsandbox.dev/node-group": "general"},
	}}
	if err := c.Create(ctx, handmade); err != nil {
		t.Fatal(err)
	}
	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(name, "")})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	adoptions := func() []string {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == gs.Name && e.Reason == v1.ReasonAdopted {
				out = append(out, e.Type+": "+e.Note)
			}
		}
		return out
	}
	testcluster.Eventually(t, "an Adopted event", func() (bool, string) {
		got := adoptions()
		return len(got) == 1 && strings.Contains(got[0], "Warning: ") && strings.Contains(got[0], `NodePool "`+name+`" (pool.yaml, document 1)`) &&
			strings.Contains(got[0], "created outside this GitSync"), fmt.Sprintf("events %q", got)
	})

	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(name, "  labels: {team: a}\n")})
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	time.Sleep(time.Second) // let the recorder flush
	if got := adoptions(); len(got) != 1 {
		t.Errorf("events after changing an object the GitSync owns: %q, want the one adoption", got)
	}
}

// TestDeletionPolicy: deleting a GitSync leaves its objects by default
// (Orphan), and with deletionPolicy Delete prunes them first, except one
// annotated agentsandbox.dev/prune: disabled, before the GitSync goes.
func TestDeletionPolicy(t *testing.T) {
	for _, policy := range []v1.GitSyncDeletionPolicy{"", v1.DeletionDelete} {
		t.Run("policy="+string(policy), func(t *testing.T) {
			t.Parallel()
			c := testcluster.Get(t).Client
			ctx := context.Background()
			pool, kept := testcluster.Name("del"), testcluster.Name("del-kept")
			srv := gittest.New(t, "", "")
			srv.Commit("main", map[string]string{
				"pool.yaml": poolYAML(pool, ""),
				"kept.yaml": poolYAML(kept, "  annotations: {agentsandbox.dev/prune: disabled}\n"),
			})
			gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.DeletionPolicy = policy })
			t.Cleanup(func() {
				for _, name := range []string{pool, kept} {
					_ = c.Delete(ctx, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}})
				}
			})
			synced := sync(t, gs)
			wantReady(t, synced, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
			if got := controllerutil.ContainsFinalizer(synced, v1.FinalizerGitSyncPrune); got != (policy == v1.DeletionDelete) {
				t.Errorf("finalizer %s present: %v, with deletionPolicy %q", v1.FinalizerGitSyncPrune, got, policy)
			}

			if err := c.Delete(ctx, gs); err != nil {
				t.Fatal(err)
			}
			testcluster.Eventually(t, "the GitSync to be gone", func() (bool, string) {
				err := c.Get(ctx, client.ObjectKeyFromObject(gs), &v1.GitSync{})
				return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
			})
			exists := func(name string) bool {
				err := c.Get(ctx, client.ObjectKey{Name: name}, &v1.NodePool{})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				return err == nil
			}
			if got, want := exists(pool), policy != v1.DeletionDelete; got != want {
				t.Errorf("pool %s exists after deleting the GitSync (deletionPolicy %q): %v, want %v", pool, policy, got, want)
			}
			if !exists(kept) {
				t.Errorf("pool %s, annotated prune: disabled, was deleted with the GitSync", kept)
			}
		})
	}
}
