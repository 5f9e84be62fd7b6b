package sandbox

import (
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// availableMembers holds the names of each warm pool's members labelled
// available and not being deleted, by pool UID, kept from the namespace
// watch's events. A claim ranks its pool's members by name
// (rankForSandbox). Listing them from the cache instead copies every
// member's namespace out of it on each claim: at four hundred members,
// listing and ranking them took 0.6 ms of CPU on a claim's way to Ready
// (bench/README). The names trail the cache by the handling
// of an event, so a claim checks each member it tries against the cache
// (Reconciler.availableMember). They are complete from the first claim
// on: controller-runtime starts the controller's workers only once the
// watch's handler has been handed every namespace already cached.
type availableMembers struct {
	mu    sync.RWMutex
	pools map[types.UID]map[string]struct{}
}

func newAvailableMembers() *availableMembers {
	return &availableMembers{pools: map[types.UID]map[string]struct{}{}}
}

// follow is the namespace watch's predicate that keeps the names. It lets
// every event through.
func (a *availableMembers) follow() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { a.replace(nil, e.Object); return true },
		UpdateFunc: func(e event.UpdateEvent) bool { a.replace(e.ObjectOld, e.ObjectNew); return true },
		DeleteFunc: func(e event.DeleteEvent) bool { a.replace(e.Object, nil); return true },
	}
}

// replace takes a namespace as it was (old) out of the names and puts it
// in as it is now (current); either may be nil. One lock covers both, so
// a claim never finds a member missing that stays available.
func (a *availableMembers) replace(old, current client.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old != nil {
		for _, pool := range availableIn(old) {
			delete(a.pools[pool], old.GetName())
			if len(a.pools[pool]) == 0 {
				delete(a.pools, pool)
			}
		}
	}
	if current != nil {
		for _, pool := range availableIn(current) {
			if a.pools[pool] == nil {
				a.pools[pool] = map[string]struct{}{}
			}
			a.pools[pool][current.GetName()] = struct{}{}
		}
	}
}

// of returns the names of the pool's available members, in no order.
func (a *availableMembers) of(pool types.UID) []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.AppendSeq(make([]string, 0, len(a.pools[pool])), maps.Keys(a.pools[pool]))
}

// availableIn returns the UIDs of the pools ns is an available member of:
// the one its label names and the one that controls it, as
// environment.MemberOf tells membership.
func availableIn(ns client.Object) []types.UID {
	if ns.GetDeletionTimestamp() != nil || ns.GetLabels()[v1.LabelMember] != v1.MemberAvailable {
		return nil
	}
	var pools []types.UID
	if uid := ns.GetLabels()[v1.LabelWarmPoolUID]; uid != "" {
		pools = append(pools, types.UID(uid))
	}
	if ref := metav1.GetControllerOfNoCopy(ns); ref != nil && !slices.Contains(pools, ref.UID) {
		pools = append(pools, ref.UID)
	}
	return pools
}
