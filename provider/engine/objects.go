package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/crdschema"
)

// installHint is what to do when the cluster does not know the kinds.
const installHint = "the agentsandbox.dev CRDs are not installed on this cluster: install them first with " +
	"`kubectl apply --server-side -k config/` from the agentsandbox repository (README, Install on a cluster)"

// objects reads and writes the objects of one kind for a resource or data
// source.
type objects struct {
	c            client.Client
	kind         *Kind
	fieldManager string
}

// newObjects returns the client side of a resource or data source of a
// type, or adds to diags why there is none.
func newObjects(clients *Clients, kind *Kind, diags *diag.Diagnostics) (objects, bool) {
	if clients == nil {
		diags.AddError("Unconfigured Provider", "the agentsandbox provider was not configured before this operation")
		return objects{}, false
	}
	k, err := kind.loaded()
	if err != nil {
		diags.AddError("Schema Error", err.Error())
		return objects{}, false
	}
	c, err := clients.Client()
	if err != nil {
		diags.AddError("Kubernetes Client Error", err.Error())
		return objects{}, false
	}
	return objects{c: c, kind: k, fieldManager: clients.FieldManager}, true
}

func (o objects) newObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.kind.schema.GVK)
	u.SetName(name)
	return u
}

// get reads an object; a missing object is an apierrors NotFound.
func (o objects) get(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	u := o.newObject(name)
	if err := o.c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return nil, o.explain(err, "read", name)
	}
	return u, nil
}

// explain makes an API error say which object and, when the CRDs are
// missing, how to install them.
func (o objects) explain(err error, verb, name string) error {
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("cannot %s %s %q: %s (%w)", verb, o.kind.Noun, name, installHint, err)
	}
	if apierrors.IsNotFound(err) {
		return err
	}
	return fmt.Errorf("cannot %s %s %q: %w", verb, o.kind.Noun, name, err)
}

// apply writes the object with server-side apply. A conflict with another
// server-side apply manager (a GitSync, another Terraform configuration)
// is an error: the object is declared twice. Fields changed imperatively
// (kubectl edit, patch) are drift and are taken back. Fields someone else
// added, which apply leaves alone because the provider never owned them, are
// removed, so the object ends exactly as declared. spec may hold
// crdschema.Unknown for fields the server decides.
func (o objects) apply(ctx context.Context, desired *unstructured.Unstructured, spec map[string]any) (*unstructured.Unstructured, error) {
	name := desired.GetName()
	desired.Object["spec"] = withoutUnknown(spec)
	err := o.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired.DeepCopy()), client.FieldOwner(o.fieldManager))
	if apierrors.IsConflict(err) {
		live, getErr := o.get(ctx, name)
		if getErr != nil {
			return nil, getErr
		}
		if owners := o.declaredBy(live, err); len(owners) > 0 {
			return nil, fmt.Errorf("cannot apply %s %q: fields are also declared with server-side apply by %s; "+
				"keep each object in one place (this configuration or the other one): %w",
				o.kind.Noun, name, strings.Join(owners, ", "), err)
		}
		tflog.Info(ctx, "taking back fields changed outside Terraform", map[string]any{"name": name, "conflict": err.Error()})
		err = o.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired.DeepCopy()),
			client.FieldOwner(o.fieldManager), client.ForceOwnership)
	}
	if err != nil {
		return nil, o.explain(err, "apply", name)
	}
	live, err := o.get(ctx, name)
	if err != nil {
		return nil, err
	}
	liveSpec, _ := live.Object["spec"].(map[string]any)
	if patch, extra := removals(spec, liveSpec); extra {
		tflog.Info(ctx, "removing fields set outside Terraform", map[string]any{"name": name, "fields": patch})
		data, err := json.Marshal(map[string]any{"spec": patch})
		if err != nil {
			return nil, err
		}
		if err := o.c.Patch(ctx, live, client.RawPatch(ktypes.MergePatchType, data), client.FieldOwner(o.fieldManager)); err != nil {
			return nil, o.explain(err, "update", name)
		}
	}
	return live, nil
}

// declaredBy returns the other server-side apply managers named in a
// conflict.
func (o objects) declaredBy(live *unstructured.Unstructured, conflict error) []string {
	var owners []string
	for _, mf := range live.GetManagedFields() {
		if mf.Operation == metav1.ManagedFieldsOperationApply && mf.Manager != o.fieldManager &&
			strings.Contains(conflict.Error(), fmt.Sprintf("%q", mf.Manager)) && !slices.Contains(owners, mf.Manager) {
			owners = append(owners, mf.Manager)
		}
	}
	return owners
}

// withoutUnknown drops the values Terraform does not know yet.
func withoutUnknown(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, e := range v {
		switch e := e.(type) {
		case map[string]any:
			out[k] = withoutUnknown(e)
		default:
			if e != crdschema.Unknown {
				out[k] = e
			}
		}
	}
	return out
}

// removals returns a JSON merge patch that deletes what live holds and
// desired does not, and restores lists that gained elements (list-map
// entries another writer owns). Unknown desired values are left alone.
func removals(desired, live map[string]any) (map[string]any, bool) {
	patch := map[string]any{}
	for k, lv := range live {
		dv, ok := desired[k]
		switch {
		case !ok:
			patch[k] = nil
		case dv == crdschema.Unknown:
		default:
			if dm, ok := dv.(map[string]any); ok {
				if lm, ok := lv.(map[string]any); ok {
					if sub, extra := removals(dm, lm); extra {
						patch[k] = sub
					}
				}
			}
			if dl, ok := dv.([]any); ok {
				if ll, ok := lv.([]any); ok && len(ll) > len(dl) {
					patch[k] = dl
				}
			}
		}
	}
	return patch, len(patch) > 0
}

// remove deletes an object and waits until it is gone. With foreground
// propagation what it owns (members, namespaces, the RuntimeClass) goes
// first, so a destroy that returns has left nothing behind; background
// returns as soon as the object itself is gone.
func (o objects) remove(ctx context.Context, name string, propagation metav1.DeletionPropagation) error {
	u := o.newObject(name)
	err := o.c.Delete(ctx, u, client.PropagationPolicy(propagation))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return o.explain(err, "delete", name)
	}
	return o.waitGone(ctx, name)
}

// waitGone waits until the object is deleted, logging what holds it.
func (o objects) waitGone(ctx context.Context, name string) error {
	start := time.Now()
	var last string
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		live, err := o.get(ctx, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("finalizers %v", live.GetFinalizers())
		logProgress(ctx, start, "waiting for "+o.kind.Noun+" to be deleted", name, last)
		return false, nil
	})
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s %q is still being deleted after %s (%s); raise timeouts.delete if its members need longer",
			o.kind.Noun, name, time.Since(start).Round(time.Second), last)
	}
	return err
}
