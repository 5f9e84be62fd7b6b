// Package applier converges the cluster to a set of declarations with
// server-side apply (fluxcd/pkg/ssa): everything is validated first (by a
// dry run, or in the process for a new object nothing else could refuse),
// then applied in dependency stages, and objects an earlier set declared
// and this one does not are pruned.
package applier

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/crdvalidation"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// FieldManager owns every field a GitSync applies. It is fixed, not per
// GitSync, so a declaration moved from one GitSync to another is not a
// conflict.
const FieldManager = "agentsandbox-gitsync"

// PruneDisabled is the value of v1.AnnotationPrune that keeps an object.
const PruneDisabled = "disabled"

// SetOwner labels every declaration as applied by the GitSync named owner.
// Declarations without labels of their own share one map of labels: a
// GitSync keeps its revision's declarations between syncs, and 10,000
// equal maps are megabytes of its heap (bench/README.md, GitSync). Sharing is safe because nothing
// changes a declaration's labels in place: SetOwner replaces the map, and
// the applier writes deep copies.
func SetOwner(decls []declarations.Declaration, owner string) {
	shared := map[string]any{v1.LabelGitSync: owner}
	for _, d := range decls {
		labels := d.Object.GetLabels()
		meta, ok := d.Object.Object["metadata"].(map[string]any)
		if len(labels) == 0 && ok {
			meta["labels"] = shared
			continue
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1.LabelGitSync] = owner
		d.Object.SetLabels(labels)
	}
}

// Applier applies declarations with one field manager.
type Applier struct {
	client client.Client
	rm     *ssa.ResourceManager
	// health is what WaitHealthy reads: client, or an informer cache.
	health       client.Reader
	healthCached bool
	// admission reads the cluster's admission policies and webhooks.
	admission client.Reader
}

// New returns an Applier writing through c and reading through it too; c
// must read from the API server, not from a cache, since what a sync
// writes is decided on what it reads.
func New(c client.Client) *Applier {
	// No status poller: the applier does not wait for health. ssa only
	// deletes (prune); validation and apply are the applier's own, so
	// each object costs at most one dry run, not ssa's second one.
	rm := ssa.NewResourceManager(c, nil, ssa.Owner{Field: FieldManager, Group: v1.GroupVersion.Group})
	return &Applier{client: c, rm: rm, health: c, admission: c}
}

// WithAdmissionReader has Validate read the cluster's admission policies
// and webhooks through r rather than the applier's client: what may refuse
// an object is a fact of the cluster, which a client acting as a
// ServiceAccount may not be allowed to list (each declaration is then
// dry-run).
func (a *Applier) WithAdmissionReader(r client.Reader) *Applier {
	a.admission = r
	return a
}

// WithHealthCache has WaitHealthy read the objects from cache, an
// informer cache of their typed kinds, instead of listing them from the
// API server on every pass: a resync of 10,000 unchanged templates then
// reads only their metadata from the API server. A cache lags, so the
// wait judges an object only once the cache has the version the sync last
// listed or applied. The cache reads with its own credentials: use it only
// where those may read every object the applier writes.
func (a *Applier) WithHealthCache(cache client.Reader) *Applier {
	a.health, a.healthCached = cache, true
	return a
}

// concurrency is how many objects are dry-run or applied at once: one
// request at a time leaves a sync of thousands of objects waiting on round
// trips, not on the API server. The API server and etcd get more done per
// second with more requests in flight, up to where the rest only queue in
// the API server's priority and fairness: on the 2-core test cluster 32
// converged 10,000 declarations fastest of 16, 32, 48 and 96 (make
// bench-gitops; see bench/README.md, GitSync).
const concurrency = 32

// Validate checks every declaration before anything is written, so
// schema, CEL and admission errors surface while nothing has changed, and
// returns what applying each one will do. An object that does not exist
// yet, of a kind no admission policy or webhook of the cluster could
// refuse, is validated in the process against its CRD (crdvalidation):
// creating it conflicts with no one and has nothing to compare, and a
// first sync of thousands of objects then costs no dry run at all. Every
// other declaration is dry-run through the API server. A field that another
// server-side apply manager owns (Terraform, say) is an error naming the
// manager: taking it over would start a tug of war. Fields owned through
// plain updates (kubectl edit) are taken back, which is how a hand edit
// gets reverted. All errors are returned, joined.
//
// The dry run's result is the object as the apply will leave it, so it is
// compared with the live object, listed whole first, to tell created,
// configured and unchanged apart: one request per object both validates
// and diffs it. detail fills Change.Fields, for people; a sync does not
// need it and keeps no object beyond its comparison. No declarations
// list nothing.
func (a *Applier) Validate(ctx context.Context, decls []declarations.Declaration, detail bool) ([]Change, error) {
	if len(decls) == 0 {
		return nil, nil
	}
	live, err := a.listContents(ctx, decls, detail)
	if err != nil {
		return nil, err
	}
	absent, err := a.absentAndUnadmitted(ctx, decls, live, detail)
	if err != nil {
		return nil, err
	}
	var validator *crdvalidation.Validator
	if len(absent) > 0 {
		if validator, err = crdValidator(); err != nil {
			return nil, err
		}
	}
	changes := make([]Change, len(decls))
	errs := make([]error, len(decls))
	// Every declaration is validated, so the errors are collected in errs
	// rather than stopping forEach at the first.
	_ = forEach(ctx, len(decls), func(i int) error {
		d := decls[i]
		if absent[KeyOf(d)] {
			if invalid := validator.Validate(ctx, d.Object); len(invalid) > 0 {
				errs[i] = fmt.Errorf("%s: %s %q: %w", d.Where(), d.Object.GetKind(), d.Object.GetName(), fieldMessages(invalid))
				return nil
			}
			changes[i] = Change{Declaration: d, Action: ssa.CreatedAction}
			return nil
		}
		merged, err := a.validate(ctx, d)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %s %q: %w", d.Where(), d.Object.GetKind(), d.Object.GetName(), err)
			return nil
		}
		changes[i] = decide(d, live[KeyOf(d)], merged)
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return changes, ctx.Err()
}

// crdValidator is built once, when first needed: compiling the CRDs' CEL
// rules takes a moment.
var crdValidator = sync.OnceValues(crdvalidation.New)

// forEach runs do(0..n-1), concurrency at a time, and stops starting new
// ones after the first error or when ctx ends; it returns that error.
func forEach(ctx context.Context, n int, do func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	slots := make(chan struct{}, concurrency)
	for i := range n {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := do(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first == nil {
		return ctx.Err()
	}
	return first
}

// validate dry-runs d, without forcing first so that a conflict with
// another apply manager shows, and returns the object as applying it
// would leave it.
func (a *Applier) validate(ctx context.Context, d declarations.Declaration) (*unstructured.Unstructured, error) {
	merged, err := a.dryRun(ctx, d.Object, false)
	if !apierrors.IsConflict(err) {
		return merged, apiMessage(err)
	}
	applyManagers, err2 := a.applyManagers(ctx, d.Object)
	if err2 != nil {
		return nil, err2
	}
	var conflicts []string
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type != metav1.CauseTypeFieldManagerConflict {
				continue
			}
			if m := quotedManager.FindStringSubmatch(c.Message); m != nil && applyManagers[m[1]] {
				conflicts = append(conflicts, fmt.Sprintf("%s is owned by field manager %q", strings.TrimPrefix(c.Field, "."), m[1]))
			}
		}
	}
	if len(conflicts) > 0 {
		return nil, fmt.Errorf("conflict: %s; remove the field from one of the two sources, or from the other manager's managed fields",
			strings.Join(conflicts, ", "))
	}
	merged, err = a.dryRun(ctx, d.Object, true)
	return merged, apiMessage(err)
}

// quotedManager extracts the manager of a conflict cause, e.g.
// `conflict with "terraform": .spec.replicas`.
var quotedManager = regexp.MustCompile(`conflict with "([^"]+)"`)

// dryRun applies obj without persisting it and returns the API server's
// answer: the object as a real apply would leave it.
func (a *Applier) dryRun(ctx context.Context, obj *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error) {
	opts := []client.ApplyOption{client.DryRunAll, client.FieldOwner(FieldManager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	out := obj.DeepCopy()
	if err := a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), opts...); err != nil {
		return nil, err
	}
	return out, nil
}

// applyManagers are the other managers that own fields of the live object
// through server-side apply.
func (a *Applier) applyManagers(ctx context.Context, obj *unstructured.Unstructured) (map[string]bool, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	if err := a.client.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range live.GetManagedFields() {
		if m.Operation == metav1.ManagedFieldsOperationApply && m.Manager != FieldManager {
			out[m.Manager] = true
		}
	}
	return out, nil
}

// apiMessage keeps what the API server says about each field (path,
// value, rule) and drops what the caller already names: the kind and name
// it prefixes its message with.
func apiMessage(err error) error {
	status, ok := err.(apierrors.APIStatus)
	if !ok || err == nil {
		return err
	}
	var fields []string
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Field != "" && c.Field != "<nil>" {
				fields = append(fields, c.Field+": "+c.Message)
			}
		}
	}
	if len(fields) == 0 {
		return errors.New(status.Status().Message)
	}
	return errors.New(strings.Join(fields, "; "))
}

// fieldMessages words errs as apiMessage words the API server's answer.
func fieldMessages(errs field.ErrorList) error {
	fields := make([]string, len(errs))
	for i, e := range errs {
		fields[i] = e.Field + ": " + e.ErrorBody()
	}
	return errors.New(strings.Join(fields, "; "))
}

// Apply writes what Validate found created or configured, stage by stage
// (each kind after the kinds it references), concurrently within a stage.
// A configured object is applied forcing ownership (Validate has refused
// conflicts with other apply managers); a created one is not, so one that
// another manager created since Validate looked is a conflict, not taken
// over. It records each applied object's new generation in changes. The
// change set lists every object, unchanged ones too; after a failure it
// lists what was written, and no later stage starts.
func (a *Applier) Apply(ctx context.Context, changes []Change) (*ssa.ChangeSet, error) {
	cs := ssa.NewChangeSet()
	for _, stage := range stages {
		var idx []int
		for i, c := range changes {
			if slices.Contains(stage, c.Declaration.Object.GetKind()) {
				idx = append(idx, i)
			}
		}
		applied := make([]bool, len(idx))
		errs := make([]error, len(idx))
		err := forEach(ctx, len(idx), func(j int) error {
			c := &changes[idx[j]]
			if c.Action != ssa.CreatedAction && c.Action != ssa.ConfiguredAction {
				applied[j] = true
				return nil
			}
			obj := c.Declaration.Object.DeepCopy()
			opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
			if c.Action == ssa.ConfiguredAction {
				opts = append(opts, client.ForceOwnership)
			}
			if err := a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
				errs[j] = fmt.Errorf("%s: %s %q: apply failed: %w", c.Declaration.Where(), obj.GetKind(), obj.GetName(), apiMessage(err))
				return errs[j]
			}
			c.Generation, c.ResourceVersion = obj.GetGeneration(), obj.GetResourceVersion()
			applied[j] = true
			return nil
		})
		for j, i := range idx {
			if applied[j] {
				cs.Add(changes[i].entry())
			}
		}
		if err != nil {
			if joined := errors.Join(errs...); joined != nil {
				return cs, joined
			}
			return cs, err
		}
	}
	return cs, nil
}

// stages orders the kinds: each references only kinds before it.
var stages = v1.ApplyStages

// Inventory lists the declared objects, sorted, as status records them.
func Inventory(decls []declarations.Declaration) []v1.InventoryEntry {
	out := make([]v1.InventoryEntry, 0, len(decls))
	for _, d := range decls {
		out = append(out, v1.InventoryEntry{ID: declarations.ID(d.Object), Version: d.Object.GroupVersionKind().Version})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Prune deletes the objects of previous that current no longer has, in
// reverse stage order, except those annotated agentsandbox.dev/prune:
// disabled and those another GitSync than owner applied since.
func (a *Applier) Prune(ctx context.Context, previous, current []v1.InventoryEntry, owner string) (*ssa.ChangeSet, error) {
	stale, err := staleObjects(previous, current)
	if err != nil {
		return nil, err
	}
	changes := ssa.NewChangeSet()
	var errs []error
	for _, obj := range stale {
		// ssa reads the object again and applies the same rules as
		// WouldPrune, so an object relabelled meanwhile is kept.
		entry, err := a.rm.Delete(ctx, obj, pruneOptions(owner))
		if entry != nil {
			changes.Add(*entry)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return changes, errors.Join(errs...)
}

// WouldPrune lists, without deleting anything, the live objects Prune
// would delete now, in the order it would: what `agentsandbox diff`
// shows. Entries no longer on the cluster, kept by the prune-disabled
// annotation, or labelled as another GitSync's are left out.
func (a *Applier) WouldPrune(ctx context.Context, previous, current []v1.InventoryEntry, owner string) ([]*unstructured.Unstructured, error) {
	stale, err := staleObjects(previous, current)
	if err != nil {
		return nil, err
	}
	opts := pruneOptions(owner)
	var out []*unstructured.Unstructured
	for _, obj := range stale {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := a.client.Get(ctx, client.ObjectKeyFromObject(obj), live)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("failed to read %s %q: %w", obj.GetKind(), obj.GetName(), err)
		}
		if labels.SelectorFromSet(opts.Inclusions).Matches(labels.Set(live.GetLabels())) && !ssautils.AnyInMetadata(live, opts.Exclusions) {
			out = append(out, live)
		}
	}
	return out, nil
}

// pruneOptions are the rules of a prune: only objects labelled as owner's,
// never those annotated agentsandbox.dev/prune: disabled.
func pruneOptions(owner string) ssa.DeleteOptions {
	opts := ssa.DefaultDeleteOptions()
	opts.Exclusions = map[string]string{v1.AnnotationPrune: PruneDisabled}
	opts.Inclusions = map[string]string{v1.LabelGitSync: owner}
	return opts
}

// staleObjects are references to the entries of previous that current
// no longer has, in the order a prune deletes them: reverse stage order,
// so nothing is deleted while a later-stage object still references it.
func staleObjects(previous, current []v1.InventoryEntry) ([]*unstructured.Unstructured, error) {
	var stale []*unstructured.Unstructured
	for _, e := range Stale(previous, current) {
		obj, err := fromID(e)
		if err != nil {
			return nil, err
		}
		stale = append(stale, obj)
	}
	stageOf := func(kind string) int {
		return slices.IndexFunc(stages, func(s []string) bool { return slices.Contains(s, kind) })
	}
	sort.SliceStable(stale, func(i, j int) bool { return stageOf(stale[i].GetKind()) > stageOf(stale[j].GetKind()) })
	return stale, nil
}

// fromID parses an inventory entry back into an object reference.
func fromID(e v1.InventoryEntry) (*unstructured.Unstructured, error) {
	parts := strings.Split(e.ID, "_")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("inventory entry %q is not group_kind_name", e.ID)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: parts[0], Version: e.Version, Kind: parts[1]})
	obj.SetName(parts[2])
	return obj, nil
}

// Client is the client the applier reads and writes through.
func (a *Applier) Client() client.Client { return a.client }

// Labelled lists the objects on the cluster labelled as owner's, as
// inventory entries: the inventory of `agentsandbox sync --once --name`,
// which has no status to keep one in.
func (a *Applier) Labelled(ctx context.Context, owner string) ([]v1.InventoryEntry, error) {
	var out []v1.InventoryEntry
	for _, stage := range stages {
		for _, kind := range stage {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(v1.GroupVersion.WithKind(kind + "List"))
			if err := a.client.List(ctx, list, client.MatchingLabels{v1.LabelGitSync: owner}); err != nil {
				return nil, fmt.Errorf("failed to list %s labelled %s=%s: %w", kind, v1.LabelGitSync, owner, err)
			}
			for i := range list.Items {
				out = append(out, v1.InventoryEntry{ID: declarations.ID(&list.Items[i]), Version: v1.GroupVersion.Version})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
