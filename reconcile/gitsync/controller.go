// Package gitsync is the GitSync controller: on every interval (or when
// asked through the reconcile-requested-at annotation) it resolves the
// GitSync's ref, fetches that revision when it is new, reads and validates
// the declarations, and only then applies them and prunes what the revision
// no longer declares. A revision that fails to fetch, decode or validate
// changes nothing on the cluster.
package gitsync

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// Reconciler reconciles GitSyncs.
type Reconciler struct {
	client.Client
	// uncached reads the credentials Secret and the ServiceAccount
	// directly (a cache would need list and watch on every one, and this
	// controller may only get those of its own namespace), and the
	// GitSync at the start of each sync (see Reconcile).
	uncached  client.Reader
	recorder  recorder.EventRecorder
	namespace string
	workDir   string
	// config and mapper make the appliers' clients, which read from the
	// API server; cache is the manager's, which the reconciler's own
	// applier reads health from.
	config *rest.Config
	mapper meta.RESTMapper
	cache  client.Reader

	memory *memory
	status *statuspatch.Writer
}

// NewReconciler returns a Reconciler using the manager's clients, which
// reads credentials Secrets and ServiceAccounts from namespace, the
// reconciler's own (empty: v1.SystemNamespace).
func NewReconciler(mgr ctrl.Manager, namespace string) *Reconciler {
	if namespace == "" {
		namespace = v1.SystemNamespace
	}
	return &Reconciler{
		Client:    mgr.GetClient(),
		uncached:  mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("gitsync-controller"),
		config:    mgr.GetConfig(),
		mapper:    mgr.GetRESTMapper(),
		cache:     mgr.GetCache(),
		namespace: namespace,
		workDir:   filepath.Join(os.TempDir(), "agentsandbox-gitsync"),
		memory:    newMemory(),
		status:    statuspatch.NewWriter(mgr.GetClient()),
	}
}

// SetupWithManager watches GitSyncs for spec changes and sync requests;
// the interval is a RequeueAfter.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := os.MkdirAll(r.workDir, 0o700); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.GitSync{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, requestedPredicate, deletingPredicate))).
		// A sync can take up to its timeout (a slow Git server, a health
		// wait): one must not hold up the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(statuspatch.RequeueConflicts(r))
}

// deletingPredicate passes the update that marks a GitSync deleted, which
// a finalizer holds.
var deletingPredicate = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
}}

// requestedPredicate passes updates that change the reconcile-requested-at
// annotation.
var requestedPredicate = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetAnnotations()[v1.AnnotationReconcileRequestedAt] != e.ObjectNew.GetAnnotations()[v1.AnnotationReconcileRequestedAt]
}}

// +kubebuilder:rbac:groups=agentsandbox.dev,resources=gitsyncs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=gitsyncs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=nodepools;sandboxtemplates;warmpools;sandboxes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=agentsandbox-system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",namespace=agentsandbox-system,resources=serviceaccounts,verbs=get;impersonate
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;mutatingadmissionpolicies;validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=list

// Reconcile runs one sync of a GitSync and schedules the next.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	// Read past the cache: a sync requested while another ran starts the
	// moment that one returns, before the cache has the status it wrote,
	// and that status decides what this sync prunes (the inventory) and
	// whether it validates every object again (observedGeneration). One
	// read a sync is cheap; pruning from an older inventory would leave
	// what the last sync added and this revision drops on the cluster for
	// good.
	gs := &v1.GitSync{}
	if err := r.uncached.Get(ctx, req.NamespacedName, gs); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetDeleted(ctx)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patcher := r.status.For(gs)
	defer func() {
		gs.Status.ObservedGeneration = gs.Generation
		if err := patcher.Patch(ctx, gs); err != nil && retErr == nil {
			retErr = err
		}
	}()
	if !gs.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, gs)
	}
	// The finalizer is there before anything is applied, so no object is
	// applied that a deletion with the policy Delete would miss.
	if err := statuspatch.SetFinalizer(ctx, r.Client, gs, v1.FinalizerGitSyncPrune, gs.Spec.DeletionPolicy == v1.DeletionDelete); err != nil {
		return ctrl.Result{}, err
	}
	if gs.Spec.Suspend {
		// Nothing is synced, deleted or rescheduled until resumed.
		setSuspended(gs)
		return ctrl.Result{}, nil
	}

	wasReady := conditions.IsTrue(gs, v1.ReadyCondition)
	previousMessage := conditions.GetMessage(gs, v1.ReadyCondition)
	if gs.Status.ObservedGeneration != gs.Generation {
		// A new spec may act as another ServiceAccount: every object is
		// validated again, as it, rather than skipped as unchanged.
		r.memory.forgetApplied(gs.UID)
		// Say so before the (possibly slow) fetch.
		conditions.MarkReconciling(gs, v1.ReasonProgressing, "syncing generation %d", gs.Generation)
		conditions.MarkUnknown(gs, v1.ReadyCondition, v1.ReasonProgressing, "syncing generation %d", gs.Generation)
		if err := patcher.Patch(ctx, gs); err != nil {
			return ctrl.Result{}, err
		}
	}

	o := r.syncWithin(ctx, gs, patcher)
	setStatus(gs, o)
	r.report(gs, o, wasReady, previousMessage)
	next := gs.Spec.IntervalOrDefault()
	if o.problem != nil {
		next = durationOr(gs.Spec.RetryInterval.Duration, next)
	}
	return ctrl.Result{RequeueAfter: jitter(next)}, nil
}

// finalize prunes what a GitSync being deleted applied, when its
// deletionPolicy is Delete and it is not suspended, and then lets it go.
// A prune that fails keeps it, saying why, and is retried with backoff.
func (r *Reconciler) finalize(ctx context.Context, gs *v1.GitSync) error {
	if !controllerutil.ContainsFinalizer(gs, v1.FinalizerGitSyncPrune) {
		return nil
	}
	if gs.Spec.DeletionPolicy == v1.DeletionDelete && !gs.Spec.Suspend {
		pruned, err := r.pruneAll(ctx, gs)
		if err != nil {
			conditions.MarkFalse(gs, v1.ReadyCondition, v1.ReasonPruneFailed,
				"deleting: pruning the objects it applied (deletionPolicy: Delete) failed: %v; to delete the GitSync without them, set spec.deletionPolicy to Orphan", err)
			return err
		}
		if summary := summarize(pruned); summary != "" {
			r.recorder.Eventf(gs, nil, corev1.EventTypeNormal, v1.ReasonPruned, "Delete", "deleted with the GitSync: %s", summary)
		}
	}
	return statuspatch.SetFinalizer(ctx, r.Client, gs, v1.FinalizerGitSyncPrune, false)
}

// pruneAll deletes what the GitSync's inventory lists, as a sync of an
// empty revision would.
func (r *Reconciler) pruneAll(ctx context.Context, gs *v1.GitSync) (*ssa.ChangeSet, error) {
	ap, err := r.applierFor(ctx, gs)
	if err != nil {
		return nil, err
	}
	return ap.Prune(ctx, gs.Status.Inventory, nil, gs.Name)
}

// forgetDeleted drops the checkouts and the memos of GitSyncs that no
// longer exist.
func (r *Reconciler) forgetDeleted(ctx context.Context) {
	list := &v1.GitSyncList{}
	if err := r.List(ctx, list); err != nil {
		return
	}
	live := map[types.UID]bool{}
	for _, gs := range list.Items {
		live[gs.UID] = true
	}
	r.memory.keepOnly(live)
}

// jitter spreads syncs by ±10% so GitSyncs created together do not hit
// the Git server together forever.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

func durationOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
