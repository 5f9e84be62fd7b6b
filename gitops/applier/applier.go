// Package applier converges the cluster to a set of declarations with
// server-side apply (fluxcd/pkg/ssa): everything is validated by a dry run
// first, then applied in dependency stages, and objects an earlier set
// declared and this one does not are pruned.
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// FieldManager owns every field a GitSync applies. It is fixed, not per
// GitSync, so a declaration moved from one GitSync to another is not a
// conflict.
const FieldManager = "agentsandbox-gitsync"

// PruneDisabled is the value of v1.AnnotationPrune that keeps an object.
const PruneDisabled = "disabled"

// LabelGitSync names the GitSync that last applied an object. Prune deletes
// only objects carrying its own name, so an object moved from one GitSync's
// repository to another's is not deleted by the first: both share the
// field manager, and the inventory alone cannot tell.
const LabelGitSync = "agentsandbox.dev/gitsync"

// SetOwner labels every declaration as applied by the GitSync named owner.
func SetOwner(decls []declarations.Declaration, owner string) {
	for _, d := range decls {
		labels := d.Object.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelGitSync] = owner
		d.Object.SetLabels(labels)
	}
}

// Applier applies declarations with one field manager.
type Applier struct {
	client client.Client
	rm     *ssa.ResourceManager
}

// New returns an Applier writing through c.
func New(c client.Client) *Applier {
	// No status poller: the applier does not wait for health.
	rm := ssa.NewResourceManager(c, nil, ssa.Owner{Field: FieldManager, Group: v1.GroupVersion.Group})
	rm.SetConcurrency(concurrency)
	return &Applier{client: c, rm: rm}
}

// Validate dry-runs every declaration through the API server, so schema,
// CEL and admission errors surface before anything is written. A field
// that another server-side apply manager owns (Terraform, say) is an error
// naming the manager: taking it over would start a tug of war. Fields
// owned through plain updates (kubectl edit) are taken back, which is how
// a hand edit gets reverted. All errors are returned, joined.
func (a *Applier) Validate(ctx context.Context, decls []declarations.Declaration) error {
	errs := make([]error, len(decls))
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrency)
	for i, d := range decls {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := a.validate(ctx, d); err != nil {
				errs[i] = fmt.Errorf("%s: %s %q: %w", d.Where(), d.Object.GetKind(), d.Object.GetName(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// concurrency is how many objects are dry-run or compared at once: one
// request at a time leaves a sync of a thousand objects waiting on round
// trips, not on the API server.
const concurrency = 8

func (a *Applier) validate(ctx context.Context, d declarations.Declaration) error {
	err := a.dryRun(ctx, d.Object, false)
	if !apierrors.IsConflict(err) {
		return apiMessage(err)
	}
	applyManagers, err2 := a.applyManagers(ctx, d.Object)
	if err2 != nil {
		return err2
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
		return fmt.Errorf("conflict: %s; remove the field from one of the two sources, or from the other manager's managed fields",
			strings.Join(conflicts, ", "))
	}
	return apiMessage(a.dryRun(ctx, d.Object, true))
}

// quotedManager extracts the manager of a conflict cause, e.g.
// `conflict with "terraform": .spec.replicas`.
var quotedManager = regexp.MustCompile(`conflict with "([^"]+)"`)

func (a *Applier) dryRun(ctx context.Context, obj *unstructured.Unstructured, force bool) error {
	opts := []client.PatchOption{client.DryRunAll, client.FieldOwner(FieldManager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	return a.client.Patch(ctx, obj.DeepCopy(), client.Apply, opts...)
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

// Apply writes the declarations stage by stage, each kind after the kinds
// it references, and only the objects a dry-run diff shows changed.
func (a *Applier) Apply(ctx context.Context, decls []declarations.Declaration) (*ssa.ChangeSet, error) {
	changes := ssa.NewChangeSet()
	for _, stage := range stages {
		var objs []*unstructured.Unstructured
		for _, d := range decls {
			if slices.Contains(stage, d.Object.GetKind()) {
				objs = append(objs, d.Object.DeepCopy())
			}
		}
		if len(objs) == 0 {
			continue
		}
		cs, err := a.rm.ApplyAll(ctx, objs, ssa.DefaultApplyOptions())
		if cs != nil {
			changes.Append(cs.Entries)
		}
		if err != nil {
			return changes, err
		}
	}
	return changes, nil
}

// stages orders the kinds: sandboxes and git syncs reference what comes
// before and nothing references them.
var stages = [][]string{{"NodePool"}, {"SandboxTemplate"}, {"WarmPool"}, {"Sandbox", "GitSync"}}

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
	changes := ssa.NewChangeSet()
	opts := ssa.DefaultDeleteOptions()
	opts.Exclusions = map[string]string{v1.AnnotationPrune: PruneDisabled}
	opts.Inclusions = map[string]string{LabelGitSync: owner}
	var errs []error
	for _, obj := range stale {
		entry, err := a.rm.Delete(ctx, obj, opts)
		if entry != nil {
			changes.Add(*entry)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return changes, errors.Join(errs...)
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
