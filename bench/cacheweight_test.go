package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// cachedKinds are the kinds the controllers keep informers of (the
// manager's cache options, and the kinds they watch or read), largest
// first at scale.
var cachedKinds = []client.ObjectList{
	&corev1.PodList{},
	&corev1.NamespaceList{},
	&networkingv1.NetworkPolicyList{},
	&rbacv1.RoleBindingList{},
	&corev1.ResourceQuotaList{},
	&corev1.LimitRangeList{},
	&corev1.PersistentVolumeClaimList{},
	&corev1.ServiceList{},
	&corev1.NodeList{},
	&v1.SandboxList{},
	&v1.SandboxTemplateList{},
	&v1.WarmPoolList{},
	&v1.NodePoolList{},
}

// cacheWeight is what the reconciler's cache holds of one kind.
type cacheWeight struct {
	kind    string
	objects int
	bytes   uint64
}

// weighCache weighs the reconciler's cached objects of each kind: the heap
// the same objects take when decoded afresh from their JSON, as the
// informer decoded them (a deep copy would share their strings), and
// passed through the cache's transforms (a new set, so maps they share
// are counted once, as in the cache). The informers' indexes and the
// reflectors' buffers are not in it.
func weighCache(b *testing.B) []cacheWeight {
	informers := reconciletest.Cache()
	if informers == nil {
		b.Fatal("no controllers running")
	}
	ctx := context.Background()
	var out []cacheWeight
	for _, list := range cachedKinds {
		if err := informers.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			b.Fatalf("list %T from the cache: %v", list, err)
		}
		data, err := json.Marshal(list)
		if err != nil {
			b.Fatal(err)
		}
		// The controllers run on while the heap is read, and what they free
		// in between can outweigh a small kind: the median of three, each
		// with transforms of its own.
		var weights [3]uint64
		for i := range weights {
			weights[i] = decodedWeight(b, data, list, transformOf(reconcile.CacheOptions(), list))
		}
		slices.Sort(weights[:])
		out = append(out, cacheWeight{
			kind:    reflect.TypeOf(list).Elem().Name(),
			objects: meta.LenList(list),
			bytes:   weights[1],
		})
	}
	return out
}

// decodedWeight is the heap that decoding data, a list like list, and
// passing its items through transform keeps.
func decodedWeight(b *testing.B, data []byte, list client.ObjectList, transform toolscache.TransformFunc) uint64 {
	fresh := reflect.New(reflect.TypeOf(list).Elem()).Interface().(client.ObjectList)
	before := heapAlloc()
	if err := json.Unmarshal(data, fresh); err != nil {
		b.Fatal(err)
	}
	transformItems(b, fresh, transform)
	after := heapAlloc()
	runtime.KeepAlive(data) // in both readings, so only the decoded objects count
	runtime.KeepAlive(fresh)
	return after - min(before, after)
}

// transformOf is the transform the cache applies to the items of list.
func transformOf(options cache.Options, list client.ObjectList) toolscache.TransformFunc {
	item := strings.TrimSuffix(reflect.TypeOf(list).Elem().Name(), "List")
	for obj, byObject := range options.ByObject {
		if reflect.TypeOf(obj).Elem().Name() == item && byObject.Transform != nil {
			return byObject.Transform
		}
	}
	return options.DefaultTransform
}

// transformItems passes each item of list through transform, in place.
func transformItems(b *testing.B, list client.ObjectList, transform toolscache.TransformFunc) {
	items, err := meta.ExtractList(list)
	if err != nil {
		b.Fatal(err)
	}
	for _, item := range items {
		if _, err := transform(item); err != nil {
			b.Fatal(err)
		}
	}
}

// heapAlloc is the heap's live bytes after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func (w cacheWeight) String() string {
	per := uint64(0)
	if w.objects > 0 {
		per = w.bytes / uint64(w.objects)
	}
	return fmt.Sprintf("%d, %.1f MiB (%.1f KiB each)", w.objects, float64(w.bytes)/(1<<20), float64(per)/1024)
}
