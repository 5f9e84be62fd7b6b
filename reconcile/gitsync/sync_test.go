package gitsync_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

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
