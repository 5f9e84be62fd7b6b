// Package statuspatch is how every controller of the reconciler writes an
// object's status: one policy, in one place.
//
// The policy, and the write budget behind it:
//
//   - A write is one JSON merge patch of the status subresource, with the
//     conditions list written whole. Each controller owns every condition
//     of its kind, so there is nothing to merge them with; Flux's patch
//     helper would send the conditions and the other fields as two
//     requests, and a warm claim's budget (bench/floor) has room for one,
//     as a GitSync of 10,000 templates has room for one write each.
//   - Nothing is written when the pass left the status as it found it, nor
//     when it equals what this process last wrote to the object and the
//     pass read a copy older than that write: a pass that starts from a
//     cache that has not yet seen the write computes the same status
//     again, and the repeat would be a wasted write (and, for a warm claim,
//     a slower one). A copy as new as the write or newer whose status
//     differs was changed since by someone else (an edit by hand), and the
//     status is written again.
//   - Where a patch of the difference from a stale copy could undo a newer
//     write, or two reconcilers could each write their own outcome, the
//     write is conditional on the resourceVersion the pass read
//     (PatchLocked); the conflict sends the pass round again on a fresher
//     copy (RequeueConflicts), without an entry in the error log.
//   - An object deleted meanwhile has no status left to write: not found is
//     success.
//
// The one other write a controller makes of its own object, a finalizer,
// is no part of it: SetFinalizer writes that apart, before the work the
// finalizer guards.
package statuspatch

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// conflictRetry is how soon a pass that ended in a conflict runs again: the
// cache catches up with the write that came first within milliseconds.
// Each conflict in a row doubles the wait, up to maxConflictRetry: an
// object written elsewhere over and over (a node a kubelet keeps updating)
// is not fought for at ten writes a second.
const (
	conflictRetry    = 100 * time.Millisecond
	maxConflictRetry = 30 * time.Second
)

// RequeueConflicts runs r, and runs a pass that ended in a conflict again
// after conflictRetry (doubled for each conflict in a row of the same
// object), logged at debug level. A conflict is a locked write doing its
// job (the pass read a copy the cache had not yet brought up to date); as a
// returned error it would be logged as a reconciler error.
func RequeueConflicts(r reconcile.Reconciler) reconcile.Reconciler {
	backoff := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](conflictRetry, maxConflictRetry)
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		result, err := r.Reconcile(ctx, req)
		if !apierrors.IsConflict(err) {
			backoff.Forget(req)
			return result, err
		}
		wait := backoff.When(req)
		log.FromContext(ctx).V(1).Info("the object changed since the copy this pass read; running again", "after", wait, "error", err.Error())
		return reconcile.Result{RequeueAfter: wait}, nil
	})
}

// Writer writes the status of one controller's objects and remembers, by
// object, a digest of what it last wrote.
type Writer struct {
	client client.Client

	mu      sync.Mutex
	written map[client.ObjectKey]writtenStatus
}

// writtenStatus is the digest of a status written to the object of uid: a
// digest, not the status, so that remembering 10,000 sandboxes costs about
// a megabyte, not the tens of megabytes of their statuses.
type writtenStatus struct {
	uid    types.UID
	digest [sha256.Size]byte
	// resourceVersion is the object's after the write.
	resourceVersion string
}

// NewWriter returns a Writer that writes through c.
func NewWriter(c client.Client) *Writer {
	return &Writer{client: c, written: map[client.ObjectKey]writtenStatus{}}
}

// For starts a pass over obj: the Patcher writes what the pass changes in
// obj's status from here on.
func (w *Writer) For(obj client.Object) *Patcher {
	return &Patcher{w: w, before: obj.DeepCopyObject().(client.Object)}
}

// Forget drops what the Writer remembers of an object that is gone.
func (w *Writer) Forget(key client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.written, key)
}

// Patcher writes one object's status within one pass. Every write moves its
// starting point to what it wrote, so a pass may write progress before its
// outcome.
type Patcher struct {
	w      *Writer
	before client.Object
}

// Patch writes obj's status if the pass changed it (see the package
// comment).
func (p *Patcher) Patch(ctx context.Context, obj client.Object) error {
	return p.patch(ctx, obj, client.MergeFrom(p.before))
}

// PatchLocked writes obj's status as Patch does, on condition that the
// object is still at the resourceVersion the pass read: a conflict error
// says another write came first.
func (p *Patcher) PatchLocked(ctx context.Context, obj client.Object) error {
	return p.patch(ctx, obj, client.MergeFromWithOptions(p.before, client.MergeFromWithOptimisticLock{}))
}

func (p *Patcher) patch(ctx context.Context, obj client.Object, patch client.Patch) error {
	status := statusOf(obj)
	if equality.Semantic.DeepEqual(statusOf(p.before), status) {
		return nil
	}
	// Compared as JSON: times are stored to the second, and a pass that
	// recovers one from elsewhere holds it at another precision.
	raw, err := json.Marshal(status)
	if err != nil {
		return err
	}
	key, digest := client.ObjectKeyFromObject(obj), sha256.Sum256(raw)
	if p.w.wroteSince(key, obj.GetUID(), digest, p.before.GetResourceVersion()) {
		return nil
	}
	if err := p.w.client.Status().Patch(ctx, obj, patch); err != nil {
		p.w.Forget(key)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("failed to patch the status of %s: %w", key.Name, err)
	}
	p.w.mu.Lock()
	p.w.written[key] = writtenStatus{uid: obj.GetUID(), digest: digest, resourceVersion: obj.GetResourceVersion()}
	p.w.mu.Unlock()
	p.before = obj.DeepCopyObject().(client.Object)
	return nil
}

// wroteSince reports whether the status of digest is the last one written
// to the object of uid at key, after the version read (so that read does
// not show it yet). Versions that do not compare (the resourceVersion is
// opaque to clients unless the API server's are comparable integers) are
// taken for a cache not caught up.
func (w *Writer) wroteSince(key client.ObjectKey, uid types.UID, digest [sha256.Size]byte, read string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.written[key]
	if !ok || last.uid != uid || last.digest != digest {
		return false
	}
	order, err := resourceversion.CompareResourceVersion(read, last.resourceVersion)
	return err != nil || order < 0
}

// statusOf is obj's status: every kind of this API keeps it in the field
// Status of its struct, which is what the status subresource holds.
func statusOf(obj client.Object) any {
	return reflect.ValueOf(obj).Elem().FieldByName("Status").Interface()
}

// SetFinalizer adds (present) or removes finalizer on obj, when it is not
// so already, in one merge patch locked to the resourceVersion read: the
// list is written whole, and from a stale copy it could drop a finalizer
// added since. An object gone meanwhile is success; a conflict is an error,
// and the pass runs again on a fresher copy (RequeueConflicts).
func SetFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string, present bool) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) == present {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	if present {
		controllerutil.AddFinalizer(obj, finalizer)
	} else {
		controllerutil.RemoveFinalizer(obj, finalizer)
	}
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to set the finalizers of %s: %w", obj.GetName(), err)
	}
	return nil
}
