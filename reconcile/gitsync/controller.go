// Package gitsync is the GitSync controller: on every interval (or when
// asked through the reconcile-requested-at annotation) it resolves the
// GitSync's ref, fetches that revision when it is new, reads and validates
// the declarations, and only then applies them and prunes what the revision
// no longer declares. A revision that fails to fetch, decode or validate
// changes nothing on the cluster.
package gitsync

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	"github.com/fluxcd/pkg/ssa"
	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
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
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/source"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// healthInterval is how often a sync looks at what it applied while
// waiting for it to converge.
const healthInterval = 500 * time.Millisecond

// DefaultSecretNamespace is where credentials Secrets live when the
// reconciler's own namespace is not given by POD_NAMESPACE.
const DefaultSecretNamespace = v1.SystemNamespace

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

	mu sync.Mutex
	// appliers keeps an applier per ServiceAccount ("" for the
	// reconciler's own): a client of its own (impersonation is per
	// connection) that shares the manager's mapper.
	appliers map[string]*applier.Applier
	// checkouts keeps the last checkout of each GitSync, so a sync whose
	// ls-remote shows an unchanged revision re-applies it without cloning.
	checkouts map[types.UID]checkout
	applied   appliedMemo
}

type checkout struct {
	dir string
	rev source.Revision
	// parsed is what was read below a path of the checkout, kept with
	// it: a resync of an unchanged revision does not decode its
	// thousands of documents again (about a second for 10,000).
	parsed *declaredRevision
}

// declaredRevision is the declarations below a path of a checkout,
// labelled as their GitSync's, each with its fingerprint: nothing changes
// them after read, so each is hashed once per revision, not per resync.
type declaredRevision struct {
	path         string
	decls        []declarations.Declaration
	fingerprints [][sha256.Size]byte
}

// NewReconciler returns a Reconciler using the manager's clients; Secrets
// are read from POD_NAMESPACE, by default agentsandbox-system.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = DefaultSecretNamespace
	}
	return &Reconciler{
		Client:    mgr.GetClient(),
		uncached:  mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("gitsync-controller"),
		config:    mgr.GetConfig(),
		mapper:    mgr.GetRESTMapper(),
		cache:     mgr.GetCache(),
		appliers:  map[string]*applier.Applier{},
		namespace: ns,
		workDir:   filepath.Join(os.TempDir(), "agentsandbox-gitsync"),
		checkouts: map[types.UID]checkout{},
		applied:   appliedMemo{},
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
		Complete(r)
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
	patcher := patch.NewSerialPatcher(gs, freshReads{Client: r.Client, reader: r.uncached})
	defer func() {
		err := kerrors.FilterOut(patcher.Patch(ctx, gs, patch.WithOwnedConditions{Conditions: []string{
			v1.ReadyCondition, v1.ReconcilingCondition, v1.StalledCondition,
		}}, patch.WithStatusObservedGeneration{}), apierrors.IsNotFound)
		if err != nil && retErr == nil {
			retErr = fmt.Errorf("failed to patch status: %w", err)
		}
	}()
	if !gs.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, gs)
	}
	// The finalizer is there before anything is applied, so no object is
	// applied that a deletion with the policy Delete would miss.
	if want := gs.Spec.DeletionPolicy == v1.DeletionDelete; want != controllerutil.ContainsFinalizer(gs, v1.FinalizerGitSyncPrune) {
		if want {
			controllerutil.AddFinalizer(gs, v1.FinalizerGitSyncPrune)
		} else {
			controllerutil.RemoveFinalizer(gs, v1.FinalizerGitSyncPrune)
		}
		if err := patcher.Patch(ctx, gs); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if gs.Spec.Suspend {
		// Nothing is synced, deleted or rescheduled until resumed.
		markHandled(gs)()
		markSuspended(gs)
		return ctrl.Result{}, nil
	}

	wasReady := conditions.IsTrue(gs, v1.ReadyCondition)
	previousMessage := conditions.GetMessage(gs, v1.ReadyCondition)
	if gs.Status.ObservedGeneration != gs.Generation {
		// A new spec may act as another ServiceAccount: every object is
		// validated again, as it, rather than skipped as unchanged.
		r.forget(gs.UID)
		// Say so before the (possibly slow) fetch.
		conditions.MarkReconciling(gs, v1.ReasonProgressing, "syncing generation %d", gs.Generation)
		conditions.MarkUnknown(gs, v1.ReadyCondition, v1.ReasonProgressing, "syncing generation %d", gs.Generation)
		if err := patcher.Patch(ctx, gs); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}

	p := r.syncAndReport(ctx, gs, patcher, wasReady, previousMessage)
	next := gs.Spec.IntervalOrDefault()
	if p != nil {
		next = durationOr(gs.Spec.RetryInterval.Duration, next)
	}
	return ctrl.Result{RequeueAfter: jitter(next)}, nil
}

// syncAndReport runs one sync within spec.timeout and reports it: the
// conditions, the sync metric and an event when the outcome is news (a
// first failure or a new message, changes applied, or back in sync).
// wasReady and previousMessage are the Ready condition before this
// reconcile marked it in progress.
func (r *Reconciler) syncAndReport(ctx context.Context, gs *v1.GitSync, patcher *patch.SerialPatcher, wasReady bool, previousMessage string) *problem.Problem {
	timeout := gs.Spec.TimeoutOrDefault()
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	handled := markHandled(gs)
	changes, p := r.sync(syncCtx, gs, patcher)
	// Only the final status says the request was handled, not the
	// progress reports written during the sync.
	handled()
	conditions.Delete(gs, v1.ReconcilingCondition)
	if p != nil {
		observeSync(gs.Name, p.Reason, start)
		if errors.Is(syncCtx.Err(), context.DeadlineExceeded) {
			p.Message += fmt.Sprintf(" (spec.timeout %s exceeded)", timeout)
		}
		if gs.Status.LastAppliedRevision != "" && p.Reason != v1.ReasonHealthCheckFailed {
			p.Message += "; the cluster keeps revision " + gs.Status.LastAppliedRevision
		}
		p.Mark(gs)
		if wasReady || previousMessage != p.Message {
			r.recorder.Eventf(gs, nil, corev1.EventTypeWarning, p.Reason, "Sync", "%s", p.Message)
		}
	} else {
		observeSync(gs.Name, "success", start)
		summary := summarize(changes)
		conditions.MarkTrue(gs, v1.ReadyCondition, v1.ReasonReconciliationSucceeded, "applied revision %s", gs.Status.LastAppliedRevision)
		conditions.Delete(gs, v1.StalledCondition)
		switch {
		case summary != "":
			r.recorder.Eventf(gs, nil, corev1.EventTypeNormal, v1.ReasonReconciliationSucceeded, "Sync", "revision %s: %s", gs.Status.LastAppliedRevision, summary)
		case !wasReady:
			r.recorder.Eventf(gs, nil, corev1.EventTypeNormal, v1.ReasonReconciliationSucceeded, "Sync", "revision %s applied; the cluster is in sync", gs.Status.LastAppliedRevision)
		}
	}
	return p
}

// freshReads is a client whose reads go to the API server. The status
// patcher reads the GitSync again to resolve a conflicting conditions
// patch; from a cache older than the object the sync started from, every
// retry would conflict again.
type freshReads struct {
	client.Client
	reader client.Reader
}

func (f freshReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return f.reader.Get(ctx, key, obj, opts...)
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
	before := gs.DeepCopy()
	controllerutil.RemoveFinalizer(gs, v1.FinalizerGitSyncPrune)
	return client.IgnoreNotFound(r.Patch(ctx, gs, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
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

// suspendedMessage starts Ready's message while a GitSync is suspended.
const suspendedMessage = "suspended (spec.suspend: true): nothing is synced until resumed"

// markSuspended says in Ready's message that the GitSync is suspended,
// keeping its status and reason, which describe the last sync, and that
// sync's message after it.
func markSuspended(gs *v1.GitSync) {
	ready := conditions.Get(gs, v1.ReadyCondition)
	switch {
	case ready == nil:
		conditions.MarkUnknown(gs, v1.ReadyCondition, v1.ReasonSuspended, "%s", suspendedMessage)
	case !strings.HasPrefix(ready.Message, suspendedMessage):
		ready.Message = suspendedMessage + "; the last sync: " + ready.Message
		conditions.Set(gs, ready)
	}
}

// markHandled returns what records the sync request being acted on now
// as handled: a request that arrives during the sync (a status patch
// returns the newest annotations) is not, and starts the next sync.
func markHandled(gs *v1.GitSync) func() {
	v, ok := gs.Annotations[v1.AnnotationReconcileRequestedAt]
	return func() {
		if ok {
			gs.Status.LastHandledReconcileAt = v
		}
	}
}

// sync fetches, reads, validates, applies, prunes and waits for health, in
// that order, and stops at the first step that fails, so a bad revision
// writes nothing. Before it creates an object it records it in the
// inventory through patcher (see gitops/doc.go).
func (r *Reconciler) sync(ctx context.Context, gs *v1.GitSync, patcher *patch.SerialPatcher) (*ssa.ChangeSet, *problem.Problem) {
	ap, err := r.applierFor(ctx, gs)
	if err != nil {
		return nil, problem.New(v1.ReasonServiceAccountNotFound, "%s", err)
	}
	auth, err := r.auth(ctx, gs)
	if err != nil {
		return nil, problem.New(v1.ReasonAuthenticationFailed, "%s", err)
	}
	co, err := r.fetch(ctx, gs, auth)
	if err != nil {
		return nil, problem.New(v1.ReasonFetchFailed, "%s", err)
	}
	gs.Status.LastFetchedRevision = string(co.rev)
	gs.Status.LastAttemptedRevision = string(co.rev)

	declared, err := r.read(gs, co)
	if err != nil {
		return nil, problem.Stall(v1.ReasonBuildFailed, "revision %s: %v", co.rev, err)
	}
	decls := declared.decls
	live, err := ap.ListLive(ctx, decls)
	if err != nil {
		return nil, problem.New(v1.ReasonValidationFailed, "revision %s: %v", co.rev, err)
	}
	todo := r.changed(gs.UID, declared, live)
	planned, err := ap.Validate(ctx, todo, false)
	if err != nil {
		return nil, problem.New(v1.ReasonValidationFailed, "revision %s: dry run refused: %v", co.rev, err)
	}
	inventory := applier.Inventory(decls)
	prune := gs.Spec.PruneOrDefault()
	var pruning []v1.InventoryEntry
	if prune {
		pruning = applier.Stale(gs.Status.Inventory, inventory)
	}
	if err := ap.CheckReferences(ctx, decls, pruning); err != nil {
		return nil, problem.New(v1.ReasonValidationFailed, "revision %s: %v", co.rev, err)
	}
	// Crash safety: what this sync may create is in the inventory before
	// it exists, so a sync killed half-way leaves nothing the next
	// revision cannot prune.
	if pending := union(gs.Status.Inventory, inventory); len(pending) > len(gs.Status.Inventory) {
		gs.Status.Inventory = pending
		if err := patcher.Patch(ctx, gs); err != nil {
			return nil, problem.New(v1.ReasonApplyFailed, "revision %s: nothing applied: failed to record the inventory before applying: %v", co.rev, err)
		}
	}
	changes, err := ap.Apply(ctx, planned)
	r.recordAdoptions(gs, co.rev, planned)
	if err != nil {
		r.forget(gs.UID)
		// The inventory keeps what this sync may have created, so a
		// later revision prunes it.
		return changes, problem.New(v1.ReasonApplyFailed, "revision %s: %v", co.rev, err)
	}
	if prune {
		pruned, err := ap.Prune(ctx, gs.Status.Inventory, inventory, gs.Name)
		if pruned != nil {
			changes.Append(pruned.Entries)
		}
		if err != nil {
			return changes, problem.New(v1.ReasonPruneFailed, "revision %s: %v", co.rev, err)
		}
	}
	gs.Status.Inventory = inventory
	gs.Status.LastAppliedRevision = string(co.rev)
	live.Record(planned)
	if err := ap.WaitHealthy(ctx, decls, live, healthInterval); err != nil {
		return changes, problem.New(v1.ReasonHealthCheckFailed, "revision %s applied, but %v", co.rev, err)
	}
	r.remember(gs.UID, declared, planned)
	return changes, nil
}

// auth reads the credentials Secret, when the GitSync names one.
func (r *Reconciler) auth(ctx context.Context, gs *v1.GitSync) (transport.AuthMethod, error) {
	if gs.Spec.SecretRef == nil {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: r.namespace, Name: gs.Spec.SecretRef.Name}
	secret := &corev1.Secret{}
	if err := r.uncached.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("spec.secretRef: secret %s not found", key)
		}
		return nil, fmt.Errorf("spec.secretRef: failed to read secret %s: %w", key, err)
	}
	return source.Auth(gs.Spec.URL, key.String(), secret.Data)
}

// applierFor returns the applier a GitSync's declarations go through: the
// reconciler's own, or one acting as spec.serviceAccountName once that
// ServiceAccount is found (the API server would let the reconciler act as
// one that does not exist, and refuse each request for lack of access).
// Each reads from the API server: the manager's client would start an
// informer for the metadata ListLive reads.
func (r *Reconciler) applierFor(ctx context.Context, gs *v1.GitSync) (*applier.Applier, error) {
	name := gs.Spec.ServiceAccountName
	key := types.NamespacedName{Namespace: r.namespace, Name: name}
	if name != "" {
		if err := r.uncached.Get(ctx, key, &corev1.ServiceAccount{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("spec.serviceAccountName: ServiceAccount %s not found", key)
			}
			return nil, fmt.Errorf("spec.serviceAccountName: failed to read ServiceAccount %s: %w", key, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ap, ok := r.appliers[name]; ok {
		return ap, nil
	}
	cfg := rest.CopyConfig(r.config)
	if name != "" {
		// The API server adds the ServiceAccount's groups to the username.
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + r.namespace + ":" + name}
	}
	c, err := client.New(cfg, client.Options{Scheme: r.Scheme(), Mapper: r.mapper})
	if err != nil && name != "" {
		return nil, fmt.Errorf("spec.serviceAccountName: failed to make a client acting as %s: %w", key, err)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to make an API server client: %w", err)
	}
	ap := applier.New(c)
	if name == "" {
		// The reconciler may read whatever it applies; a ServiceAccount
		// may not read what the reconciler's cache holds.
		ap = ap.WithHealthCache(r.cache)
	}
	r.appliers[name] = ap
	return ap, nil
}

// fetch returns a checkout of the revision the ref points at now, cloning
// only when the kept checkout holds another revision.
func (r *Reconciler) fetch(ctx context.Context, gs *v1.GitSync, auth transport.AuthMethod) (checkout, error) {
	rev, err := source.Resolve(ctx, gs.Spec.URL, gs.Spec.Ref, auth)
	if err != nil {
		return checkout{}, err
	}
	r.mu.Lock()
	kept, ok := r.checkouts[gs.UID]
	r.mu.Unlock()
	if ok && kept.rev == rev {
		return kept, nil
	}
	dir, rev, err := source.Fetch(ctx, gs.Spec.URL, gs.Spec.Ref, auth, r.workDir)
	if err != nil {
		return checkout{}, err
	}
	co := checkout{dir: dir, rev: rev}
	r.mu.Lock()
	r.checkouts[gs.UID] = co
	r.mu.Unlock()
	if ok {
		_ = os.RemoveAll(kept.dir)
	}
	return co, nil
}

// read returns the declarations of the checkout below spec.path, labelled
// as gs's, decoding them only when the checkout or the path is new. They
// are not changed afterwards: the applier copies what it sends.
func (r *Reconciler) read(gs *v1.GitSync, co checkout) (*declaredRevision, error) {
	path := gs.Spec.PathOrDefault()
	if co.parsed != nil && co.parsed.path == path {
		return co.parsed, nil
	}
	decls, err := declarations.ReadDir(co.dir, path)
	if err != nil {
		return nil, err
	}
	applier.SetOwner(decls, gs.Name)
	declared := &declaredRevision{path: path, decls: decls, fingerprints: make([][sha256.Size]byte, len(decls))}
	for i, d := range decls {
		if declared.fingerprints[i], err = fingerprint(d); err != nil {
			return nil, err
		}
	}
	co.parsed = declared
	r.mu.Lock()
	if kept, ok := r.checkouts[gs.UID]; ok && kept.dir == co.dir {
		r.checkouts[gs.UID] = co
	}
	r.mu.Unlock()
	return declared, nil
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
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, co := range r.checkouts {
		if !live[uid] {
			_ = os.RemoveAll(co.dir)
			delete(r.checkouts, uid)
		}
	}
	for uid := range r.applied {
		if !live[uid] {
			delete(r.applied, uid)
		}
	}
}

// summarize lists what a sync changed, "" when nothing.
func summarize(cs *ssa.ChangeSet) string {
	if cs == nil {
		return ""
	}
	var parts []string
	for _, e := range cs.Entries {
		if e.Action == ssa.CreatedAction || e.Action == ssa.ConfiguredAction || e.Action == ssa.DeletedAction {
			parts = append(parts, e.Subject+" "+string(e.Action))
		}
	}
	// An event is for people: a large first sync lists a few and counts
	// the rest.
	const shown = 10
	if len(parts) > shown {
		return fmt.Sprintf("%s and %d more", strings.Join(parts[:shown], ", "), len(parts)-shown)
	}
	return strings.Join(parts, ", ")
}

// recordAdoptions records a warning naming the objects the sync took over:
// made outside Git (with kubectl, say) or applied by another GitSync,
// they are from now on changed and pruned by this one, which their
// makers should hear about.
func (r *Reconciler) recordAdoptions(gs *v1.GitSync, rev source.Revision, planned []applier.Change) {
	var adopted []string
	for _, c := range planned {
		if c.Adopted && c.ResourceVersion != "" {
			adopted = append(adopted, fmt.Sprintf("%s %q (%s)", c.Declaration.Object.GetKind(), c.Declaration.Object.GetName(), c.Declaration.Where()))
		}
	}
	if len(adopted) == 0 {
		return
	}
	const shown = 10
	list := strings.Join(adopted[:min(shown, len(adopted))], ", ")
	if len(adopted) > shown {
		list += fmt.Sprintf(" and %d more", len(adopted)-shown)
	}
	r.recorder.Eventf(gs, nil, corev1.EventTypeWarning, v1.ReasonAdopted, "Sync",
		"revision %s adopted %s: created outside this GitSync (with kubectl, say, or by another GitSync), now managed and pruned from Git", rev, list)
}

// union is a ∪ b, keeping a's order and appending what only b has.
func union(a, b []v1.InventoryEntry) []v1.InventoryEntry {
	seen := map[string]bool{}
	out := make([]v1.InventoryEntry, 0, len(a)+len(b))
	for _, e := range append(append([]v1.InventoryEntry{}, a...), b...) {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
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
