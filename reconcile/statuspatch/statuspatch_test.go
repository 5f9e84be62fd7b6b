package statuspatch_test

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// newTemplate creates a template, which no controller of this package
// writes, and returns it as read back.
func newTemplate(t *testing.T, c client.Client) *v1.SandboxTemplate {
	t.Helper()
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("status")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
	if err := c.Create(context.Background(), tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), tpl) })
	return tpl
}

// TestPatchWritesOnlyWhatChanged: a pass that changes the status writes it
// (the API server has it, the resourceVersion moves); one that changes
// nothing, and one from a stale copy that computes what was last written,
// write nothing; one that computes something new from a stale copy writes.
func TestPatchWritesOnlyWhatChanged(t *testing.T) {
	c, ctx := testcluster.Get(t).Client, context.Background()
	w := statuspatch.NewWriter(c)
	tpl := newTemplate(t, c)
	stale := tpl.DeepCopy()

	p := w.For(tpl)
	tpl.Status.ContentHash = "first"
	conditions.MarkTrue(tpl, v1.ReadyCondition, v1.ReasonValid, "valid")
	if err := p.Patch(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	written := tpl.ResourceVersion
	got := &v1.SandboxTemplate{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(tpl), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ContentHash != "first" || !conditions.IsTrue(got, v1.ReadyCondition) {
		t.Fatalf("the API server has status %+v, want the one written", got.Status)
	}

	if err := w.For(tpl).Patch(ctx, tpl); err != nil || tpl.ResourceVersion != written {
		t.Errorf("an unchanged status was written (resourceVersion %s → %s, err %v)", written, tpl.ResourceVersion, err)
	}

	again := stale.DeepCopy()
	p = w.For(again)
	again.Status = *got.Status.DeepCopy()
	if err := p.Patch(ctx, again); err != nil || again.ResourceVersion != stale.ResourceVersion {
		t.Errorf("a stale pass that computed the status last written wrote it again (resourceVersion %s, err %v)", again.ResourceVersion, err)
	}

	p = w.For(stale)
	stale.Status.ContentHash = "second"
	if err := p.Patch(ctx, stale); err != nil || stale.ResourceVersion == written {
		t.Errorf("a new status was not written (resourceVersion %s, err %v)", stale.ResourceVersion, err)
	}
}

// TestPatchRestoresAStatusChangedSince: a status changed by someone else
// after the Writer's write (an edit by hand) is written back by the next
// pass that computes the one the Writer wrote, from a copy that shows the
// edit; the Writer's memory of its write does not hold it back.
func TestPatchRestoresAStatusChangedSince(t *testing.T) {
	c, ctx := testcluster.Get(t).Client, context.Background()
	w := statuspatch.NewWriter(c)
	tpl := newTemplate(t, c)
	compute := func(obj *v1.SandboxTemplate) { obj.Status.ContentHash = "computed" }

	p := w.For(tpl)
	compute(tpl)
	if err := p.Patch(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	edited := tpl.DeepCopy()
	edited.Status.ContentHash = "edited by hand"
	if err := c.Status().Update(ctx, edited); err != nil {
		t.Fatal(err)
	}

	p = w.For(edited)
	compute(edited)
	if err := p.Patch(ctx, edited); err != nil {
		t.Fatal(err)
	}
	got := &v1.SandboxTemplate{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(tpl), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ContentHash != "computed" {
		t.Errorf("the API server has status.contentHash %q, want the computed one written back", got.Status.ContentHash)
	}
}

// TestPatchLockedRefusesAStaleCopy: a locked write from a copy older than
// the object conflicts, and the write after it, from a fresh copy, lands.
func TestPatchLockedRefusesAStaleCopy(t *testing.T) {
	c, ctx := testcluster.Get(t).Client, context.Background()
	w := statuspatch.NewWriter(c)
	tpl := newTemplate(t, c)
	stale := tpl.DeepCopy()

	p := w.For(tpl)
	tpl.Status.ContentHash = "newer"
	if err := p.PatchLocked(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	p = w.For(stale)
	stale.Status.ContentHash = "older"
	if err := p.PatchLocked(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("a locked write from a stale copy: %v, want a conflict", err)
	}
	fresh := &v1.SandboxTemplate{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(tpl), fresh); err != nil {
		t.Fatal(err)
	}
	p = w.For(fresh)
	fresh.Status.ContentHash = "older"
	if err := p.PatchLocked(ctx, fresh); err != nil {
		t.Fatalf("a locked write from a fresh copy: %v", err)
	}
}

// TestPatchOfAnObjectGoneIsNoError: the object was deleted during the pass.
func TestPatchOfAnObjectGoneIsNoError(t *testing.T) {
	c, ctx := testcluster.Get(t).Client, context.Background()
	tpl := newTemplate(t, c)
	p := statuspatch.NewWriter(c).For(tpl)
	if err := c.Delete(ctx, tpl.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	tpl.Status.ContentHash = "too late"
	if err := p.Patch(ctx, tpl); err != nil {
		t.Errorf("writing the status of an object gone: %v, want none", err)
	}
}

// TestSetFinalizer adds a finalizer once, and removes it.
func TestSetFinalizer(t *testing.T) {
	c, ctx := testcluster.Get(t).Client, context.Background()
	tpl := newTemplate(t, c)
	const finalizer = "agentsandbox.dev/test"
	for _, present := range []bool{true, true, false} {
		if err := statuspatch.SetFinalizer(ctx, c, tpl, finalizer, present); err != nil {
			t.Fatal(err)
		}
		got := &v1.SandboxTemplate{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tpl), got); err != nil {
			t.Fatal(err)
		}
		if has := controllerutil.ContainsFinalizer(got, finalizer); has != present || len(got.Finalizers) != len(tpl.Finalizers) {
			t.Errorf("finalizers %v after SetFinalizer(%t), want it there: %t", got.Finalizers, present, present)
		}
	}
}
