package applier

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// WaitHealthy polls the declared objects every interval until each has
// converged, and returns an error naming the objects still waiting when ctx
// ends. An object that failed (Stalled) ends the wait at once: waiting
// longer cannot help.
//
// Converged is v1alpha1.Readiness's Ready: the controller observed the
// generation and reports Ready, and for a warm pool also has all its
// members Ready. An object whose controller has not written any status yet
// counts as converged, as in kstatus.
//
// newest are the versions of the objects the caller last listed or
// applied (ListLive, Record). An object read in an older version (a lower
// resourceVersion, comparable as KEP-5504 specifies), or not read at all,
// is waited for rather than judged when read from the health cache: the
// cache may not have the caller's own write yet, or a status written just
// before the listing, and judging it would report on the past. So health
// read from a cache is as fresh as the listing. (A list from the API
// server is always at least as fresh.)
func (a *Applier) WaitHealthy(ctx context.Context, decls []declarations.Declaration, newest Live, interval time.Duration) error {
	pending := slices.Clone(decls)
	for {
		// One list per kind a pass, not one read per object: a sync of
		// thousands of objects checks them in a few requests.
		states, err := a.listHealth(ctx, pending)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("not healthy in time: %s", strings.Join(unchecked(pending), "; "))
			}
			return err
		}
		var waiting []string
		next := pending[:0]
		for _, d := range pending {
			key := KeyOf(d)
			state, found := states[key]
			want, known := newest[key]
			switch {
			case known && a.healthCached && (!found || older(state.resourceVersion, want.ResourceVersion)):
				state.why = fmt.Sprintf("the cache has not seen resourceVersion %s yet", want.ResourceVersion)
			case !found:
				return fmt.Errorf("%s: %s %q is not on the cluster", d.Where(), d.Object.GetKind(), d.Object.GetName())
			case state.failed:
				return fmt.Errorf("%s: %s %q failed: %s", d.Where(), d.Object.GetKind(), d.Object.GetName(), state.why)
			case state.healthy:
				continue
			}
			next = append(next, d)
			waiting = append(waiting, fmt.Sprintf("%s %q: %s", d.Object.GetKind(), d.Object.GetName(), state.why))
		}
		pending = next
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy in time: %s", strings.Join(waiting, "; "))
		case <-time.After(interval):
		}
	}
}

// listHealth judges the health of the declared objects, read as their
// typed kinds from the health cache, or a page at a time from the API
// server. A pass keeps a few bytes of each object.
func (a *Applier) listHealth(ctx context.Context, decls []declarations.Declaration) (map[ObjectKey]healthState, error) {
	out := map[ObjectKey]healthState{}
	// Read only: the cache's own objects, not copies of them.
	opts := append(listOptions(decls, true), client.UnsafeDisableDeepCopy)
	err := listPages(ctx, a.health, decls, opts, !a.healthCached, a.typedList,
		func(gvk schema.GroupVersionKind, list client.ObjectList) {
			_ = meta.EachListItem(list, func(item runtime.Object) error {
				obj := item.(client.Object)
				out[ObjectKey{gvk, obj.GetName()}] = healthOf(obj, gvk)
				return nil
			})
		})
	return out, err
}

// typedList is an empty list of gvk's objects as the scheme's Go type.
func (a *Applier) typedList(gvk schema.GroupVersionKind) (client.ObjectList, error) {
	obj, err := a.client.Scheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, err
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%s is not a list", gvk.Kind)
	}
	return list, nil
}

// unchecked names the objects a wait ended before looking at.
func unchecked(decls []declarations.Declaration) []string {
	out := make([]string, len(decls))
	for i, d := range decls {
		out[i] = fmt.Sprintf("%s %q: not checked yet", d.Object.GetKind(), d.Object.GetName())
	}
	return out
}

// healthState is whether a live object has converged, or failed, and why
// not, judged on the object at resourceVersion.
type healthState struct {
	healthy, failed bool
	why             string
	resourceVersion string
}

// older reports whether resourceVersion a is older than b. Either one
// malformed (an API server that does not follow KEP-5504) compares as
// not older: the object is judged as read rather than waited for forever.
func older(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp < 0
}

// healthOf judges obj, a typed object of kind gvk, by the API's one
// definition of ready (v1alpha1.Readiness), which Terraform's waits share.
// An object no controller has written conditions for yet counts as
// converged, as in kstatus, so that a declaration of a kind whose
// controller does not run does not hold every sync until its timeout; a
// warm pool's members are still counted, as they are what it declares.
func healthOf(obj client.Object, gvk schema.GroupVersionKind) healthState {
	state := healthState{resourceVersion: obj.GetResourceVersion()}
	judged, ok := obj.(interface {
		v1.Judged
		conditions.Getter
	})
	if !ok {
		state.why = fmt.Sprintf("%s has no readiness", gvk.Kind)
		return state
	}
	if len(judged.GetConditions()) == 0 {
		state.healthy = true
		if pool, ok := obj.(*v1.WarmPool); ok && pool.Status.ReadyReplicas != pool.DesiredReplicas() {
			state.healthy = false
			state.why = v1.MembersReady(pool)
		}
		return state
	}
	r := judged.Readiness()
	state.healthy, state.failed = r.Ready, r.Failed
	if !r.Ready {
		state.why = r.Message
	}
	return state
}
