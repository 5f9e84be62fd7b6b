package statuspatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// statusOf reads the field Status by reflection, which panics on a kind
// without one: every kind the controllers write must give its own status
// type, the one a write compares.
func TestStatusOfEveryKind(t *testing.T) {
	for obj, want := range map[client.Object]any{
		&v1.NodePool{}:        v1.NodePoolStatus{},
		&v1.SandboxTemplate{}: v1.SandboxTemplateStatus{},
		&v1.Sandbox{}:         v1.SandboxStatus{},
		&v1.WarmPool{}:        v1.WarmPoolStatus{},
		&v1.GitSync{}:         v1.GitSyncStatus{},
	} {
		if got := statusOf(obj); fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
			t.Errorf("statusOf(%T) is a %T, want %T", obj, got, want)
		}
	}
}

// A pass that ends in a conflict, even one wrapped in the pass's own
// message, runs again soon and is not an error, a little later for each
// conflict in a row; any other outcome is the pass's own, and starts the
// count again.
func TestRequeueConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "agentsandbox.dev", Resource: "sandboxes"}, "s", errors.New("the object has been modified"))
	failed := errors.New("failed to create namespace")
	var result reconcile.Result
	var err error
	pass := RequeueConflicts(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return result, err }))
	for i, step := range []struct {
		result     reconcile.Result
		err        error
		wantResult reconcile.Result
		wantErr    error
	}{
		{err: conflict, wantResult: reconcile.Result{RequeueAfter: conflictRetry}},
		{err: fmt.Errorf("failed to set the finalizers of s: %w", conflict), wantResult: reconcile.Result{RequeueAfter: 2 * conflictRetry}},
		{err: conflict, wantResult: reconcile.Result{RequeueAfter: 4 * conflictRetry}},
		{err: failed, wantErr: failed},
		{err: conflict, wantResult: reconcile.Result{RequeueAfter: conflictRetry}},
		{result: reconcile.Result{RequeueAfter: time.Minute}, wantResult: reconcile.Result{RequeueAfter: time.Minute}},
	} {
		result, err = step.result, step.err
		got, gotErr := pass.Reconcile(context.Background(), reconcile.Request{})
		if got != step.wantResult || !errors.Is(gotErr, step.wantErr) || (gotErr == nil) != (step.wantErr == nil) {
			t.Errorf("pass %d: got %+v, %v; want %+v, %v", i, got, gotErr, step.wantResult, step.wantErr)
		}
	}
}
