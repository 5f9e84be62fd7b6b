package reconcile

import (
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// maxSharedMaps bounds how many distinct maps of one kind are kept for
// sharing: they are never dropped, so a cluster cycling through ever new
// values keeps at most this many (under a kilobyte each) beyond its
// templates.
const maxSharedMaps = 256

// sharedMaps hands out one copy of each distinct map, told apart by a key
// that spells out its content.
type sharedMaps[M any] struct {
	mu   sync.Mutex
	kept map[string]M
}

// share returns the kept map of key, keeping m when it is the first.
func (s *sharedMaps[M]) share(key string, m M) M {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept, ok := s.kept[key]; ok {
		return kept
	}
	if s.kept == nil {
		s.kept = map[string]M{}
	}
	if len(s.kept) < maxSharedMaps {
		s.kept[key] = m
	}
	return m
}

// keyOf spells out a map in key order, each value written by value; NUL
// separates, as no label and no quantity has one.
func keyOf[K ~string, V any](m map[K]V, value func(V) string) string {
	var key strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		key.WriteString(string(k) + "\x00" + value(m[k]) + "\x00")
	}
	return key.String()
}

// resourceLists shares equal resource lists. Two lists are equal when
// their quantities are written alike in canonical form, the form they are
// also written out in: no reader can tell them apart.
type resourceLists struct {
	maps sharedMaps[corev1.ResourceList]
}

func (s *resourceLists) share(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	return s.maps.share(keyOf(l, func(q resource.Quantity) string { return q.String() }), l)
}

// templateTransform strips the managed fields of a template about to be
// cached and makes its labels and resource lists shared ones. Small Go
// maps are costly: a list of two quantities takes about 700 bytes, a map
// of one label about 300, and a cached template of the usual size drops
// from 2.9 to 1.1 KB (BenchmarkTemplateCacheMemory). Thousands of
// templates synced from Git mostly share a few sizes and the label of
// their GitSync. Sharing is safe because nothing writes to a cached
// object: the cache hands out deep copies, and event handlers and the
// GitSync health wait (which lists without copies) only read.
func templateTransform() toolscache.TransformFunc {
	var lists resourceLists
	var labels sharedMaps[map[string]string]
	return stripThen(func(tpl *v1.SandboxTemplate) {
		tpl.Spec.Resources.Requests = lists.share(tpl.Spec.Resources.Requests)
		tpl.Spec.Resources.Limits = lists.share(tpl.Spec.Resources.Limits)
		if len(tpl.Labels) > 0 {
			tpl.Labels = labels.share(keyOf(tpl.Labels, func(v string) string { return v }), tpl.Labels)
		}
	})
}

// quotaTransform keeps of a sandbox's ResourceQuota its metadata and its
// limits, shared: the quotas of one template's sandboxes hold the same
// few lists. Its status (what is used, the limits again) is the API
// server's count, which the controllers never read: a quota is compared
// with what it should be by its spec alone (apply.IfChanged).
func quotaTransform() toolscache.TransformFunc {
	var lists resourceLists
	return stripThen(func(quota *corev1.ResourceQuota) {
		quota.Spec.Hard = lists.share(quota.Spec.Hard)
		quota.Status = corev1.ResourceQuotaStatus{}
	})
}

// limitRangeTransform makes the resource lists of a sandbox's LimitRange,
// five to an item and alike across one template's sandboxes, shared ones.
func limitRangeTransform() toolscache.TransformFunc {
	var lists resourceLists
	return stripThen(func(limits *corev1.LimitRange) {
		for i := range limits.Spec.Limits {
			item := &limits.Spec.Limits[i]
			item.Max = lists.share(item.Max)
			item.Min = lists.share(item.Min)
			item.Default = lists.share(item.Default)
			item.DefaultRequest = lists.share(item.DefaultRequest)
			item.MaxLimitRequestRatio = lists.share(item.MaxLimitRequestRatio)
		}
	})
}

// stripThen strips an object's managed fields, as every cached kind's
// are (cache.Options.DefaultTransform), then slims an object of kind T
// with slim.
func stripThen[T any](slim func(T)) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		if o, ok := obj.(T); ok {
			slim(o)
		}
		return obj, nil
	}
}

// podTransform keeps of a sandbox's pod what the controllers read: its
// metadata, the node it runs on and its status, without the parts of
// its containers' statuses nobody reads (images, IDs, resources, mounts).
// The spec (containers, volumes, the service account token's projection)
// is most of a pod and is only ever written, by the create: a running pod
// is never rewritten, and every write to a pod goes through a Delete or a
// read past the cache. Thousands of sandboxes' pods are then mostly their
// metadata.
func podTransform() toolscache.TransformFunc {
	return stripThen(func(pod *corev1.Pod) {
		pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName}
		slimContainerStatuses(pod.Status.InitContainerStatuses)
		slimContainerStatuses(pod.Status.ContainerStatuses)
		pod.Status.EphemeralContainerStatuses = nil
	})
}

// slimContainerStatuses keeps of each status what the sandbox's status is
// told from: its name, state, last state, readiness and restarts.
func slimContainerStatuses(statuses []corev1.ContainerStatus) {
	for i, s := range statuses {
		statuses[i] = corev1.ContainerStatus{
			Name: s.Name, State: s.State, LastTerminationState: s.LastTerminationState,
			Ready: s.Ready, RestartCount: s.RestartCount, Started: s.Started,
		}
	}
}

// nodeTransform keeps of a node what the node pools read: its labels, the
// record of the taints a pool set (v1.AnnotationOwnedTaints), its spec
// (the taints) and its conditions. A node's status (its images, above
// all) and its other annotations are most of it, and every node of the
// cluster is cached, not only a pool's; a node is written only after a
// read past the cache (patchNode).
func nodeTransform() toolscache.TransformFunc {
	return stripThen(func(node *corev1.Node) {
		node.Status = corev1.NodeStatus{Conditions: node.Status.Conditions}
		owned, ok := node.Annotations[v1.AnnotationOwnedTaints]
		node.Annotations = nil
		if ok {
			node.Annotations = map[string]string{v1.AnnotationOwnedTaints: owned}
		}
	})
}
