package reconcile

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// maxShared bounds how many distinct values of one kind are kept for
// sharing: they are never dropped, so a cluster cycling through ever new
// values keeps at most this many (a few kilobytes at most each) beyond
// its templates.
const maxShared = 256

// shared hands out one copy of each distinct value (a map, a spec), told
// apart by a key that spells out its content.
type shared[V any] struct {
	mu   sync.Mutex
	kept map[string]V
}

// share returns the kept value of key, keeping v when it is the first.
func (s *shared[V]) share(key string, v V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept, ok := s.kept[key]; ok {
		return kept
	}
	if s.kept == nil {
		s.kept = map[string]V{}
	}
	if len(s.kept) < maxShared {
		s.kept[key] = v
	}
	return v
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
	maps shared[corev1.ResourceList]
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
	var labels shared[map[string]string]
	return stripThen(func(tpl *v1.SandboxTemplate) {
		tpl.Spec.Resources.Requests = lists.share(tpl.Spec.Resources.Requests)
		tpl.Spec.Resources.Limits = lists.share(tpl.Spec.Resources.Limits)
		if len(tpl.Labels) > 0 {
			tpl.Labels = labels.share(keyOf(tpl.Labels, func(v string) string { return v }), tpl.Labels)
		}
	})
}

// sandboxTransform interns the strings of a Sandbox alike across
// sandboxes: its owner and what it starts from, its state, phase and pod's
// name, and its conditions' type, status and reason. The thousands of
// Sandboxes are decoded from JSON, a string apiece.
func sandboxTransform() toolscache.TransformFunc {
	return stripThen(func(sbx *v1.Sandbox) {
		spec, status := &sbx.Spec, &sbx.Status
		spec.Owner, spec.State = intern(spec.Owner), v1.SandboxState(intern(string(spec.State)))
		for _, ref := range []*v1.LocalObjectReference{spec.TemplateRef, spec.WarmPoolRef} {
			if ref != nil {
				ref.Name = intern(ref.Name)
			}
		}
		status.Phase, status.LaunchType = v1.SandboxPhase(intern(string(status.Phase))), v1.LaunchType(intern(string(status.LaunchType)))
		status.PodName = intern(status.PodName)
		for i := range status.Conditions {
			c := &status.Conditions[i]
			c.Type, c.Status, c.Reason = intern(c.Type), metav1.ConditionStatus(intern(string(c.Status))), intern(c.Reason)
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

// stripThen strips an object's managed fields and interns its metadata,
// as every cached kind's are (defaultTransform), then slims an object of
// kind T with slim.
func stripThen[T any](slim func(T)) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	var alike shared[map[string]string]
	return func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		if o, ok := obj.(metav1.Object); ok {
			internMetadata(o, &alike)
		}
		if o, ok := obj.(T); ok {
			slim(o)
		}
		return obj, nil
	}
}

// defaultTransform is what the cache does to a kind with no transform of
// its own: no controller reads managed fields from the cache (a conflict
// check reads past it), and they would be kept for every cached object.
func defaultTransform() toolscache.TransformFunc {
	return stripThen(func(metav1.Object) {})
}

// internMetadata makes the strings of an object's metadata that are alike
// across objects one shared copy each (unique.Make): the keys of its
// labels and annotations, the values of the keys in repeatedValues, its
// owner references' API version and kind, and its finalizers. A decoder
// allocates every string afresh, so 10,000 sandboxes' namespaces would
// otherwise hold 10,000 copies of each pod security label, key and value.
// The strings that are each object's own (its name, a sandbox's name and
// UID in its labels, a claim's time) are left as they are: interning them
// would add a table entry each and share nothing. A map with none of those
// is shared whole, from alike: every sandbox's quota, limit range and
// policy carries the same one label, and a Go map of one entry takes
// about 300 bytes.
func internMetadata(obj metav1.Object, alike *shared[map[string]string]) {
	obj.SetLabels(internMap(obj.GetLabels(), alike))
	obj.SetAnnotations(internMap(obj.GetAnnotations(), alike))
	refs := obj.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = intern(refs[i].APIVersion), intern(refs[i].Kind)
	}
	finalizers := obj.GetFinalizers()
	for i := range finalizers {
		finalizers[i] = intern(finalizers[i])
	}
}

// repeatedValues are the label and annotation keys whose values are alike
// across many objects: who manages them, the template, pool (name and
// UID), member state and template hash of a sandbox's objects, its owner
// (label and annotation have one key), a node's pool, a GitSync's name,
// the egress gateway's address on a pod. The pod security labels
// (podSecurityLabels) are too.
var repeatedValues = map[string]bool{
	v1.LabelManagedBy: true, v1.LabelTemplate: true, v1.LabelWarmPool: true, v1.LabelWarmPoolUID: true, v1.LabelMember: true,
	v1.LabelTemplateHash: true, v1.LabelOwner: true, v1.LabelNodePool: true, v1.LabelGitSync: true, v1.AnnotationEgressGateway: true,
}

// podSecurityLabels is the prefix of the labels that set a namespace's pod
// security levels, the same on every sandbox's namespace.
const podSecurityLabels = "pod-security.kubernetes.io/"

// internMap is a copy of m with its keys interned, and the values of the
// keys whose values repeat; the one alike keeps when every value repeats.
func internMap(m map[string]string, alike *shared[map[string]string]) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	repeated := true
	for k, v := range m {
		if repeatedValues[k] || strings.HasPrefix(k, podSecurityLabels) {
			v = intern(v)
		} else {
			repeated = false
		}
		out[intern(k)] = v
	}
	if repeated {
		return alike.share(keyOf(out, func(v string) string { return v }), out)
	}
	return out
}

func intern(s string) string { return unique.Make(s).Value() }

// networkPolicyTransform makes equal NetworkPolicy specs one shared
// spec. A sandbox's policy is built from its template alone (it names no
// namespace), so one template's thousands of sandboxes hold the same
// spec, about a kilobyte decoded, compared with what it should be
// (apply.IfChanged) and never written to in the cache.
func networkPolicyTransform() toolscache.TransformFunc {
	var specs shared[networkingv1.NetworkPolicySpec]
	return stripThen(func(policy *networkingv1.NetworkPolicy) {
		// The protobuf encoding writes map entries in key order, so equal
		// specs encode alike.
		if key, err := policy.Spec.Marshal(); err == nil {
			policy.Spec = specs.share(string(key), policy.Spec)
		}
	})
}

// roleBindingTransform interns the strings of a binding's subjects and
// role: every sandbox's binding names the same role, and its owner, one of
// a few developers, as the bindings of the owner's other sandboxes do.
func roleBindingTransform() toolscache.TransformFunc {
	return stripThen(func(binding *rbacv1.RoleBinding) {
		for i := range binding.Subjects {
			s := &binding.Subjects[i]
			s.Kind, s.APIGroup, s.Name, s.Namespace = intern(s.Kind), intern(s.APIGroup), intern(s.Name), intern(s.Namespace)
		}
		role := &binding.RoleRef
		role.APIGroup, role.Kind, role.Name = intern(role.APIGroup), intern(role.Kind), intern(role.Name)
	})
}

// namespaceTransform interns a namespace's finalizer and phase, the same
// on every namespace.
func namespaceTransform() toolscache.TransformFunc {
	return stripThen(func(ns *corev1.Namespace) {
		for i, f := range ns.Spec.Finalizers {
			ns.Spec.Finalizers[i] = corev1.FinalizerName(intern(string(f)))
		}
		ns.Status.Phase = corev1.NamespacePhase(intern(string(ns.Status.Phase)))
	})
}

// podTransform keeps of a sandbox's pod what the controllers read: its
// metadata, the node it runs on, its /etc/hosts entries (the Service
// addresses it was given, which Egress.Moved compares; none for most
// sandboxes) and of its status the phase, message, IP,
// the Ready and PodScheduled conditions and its containers' statuses
// without the parts nobody reads (images, IDs, resources, mounts).
// The spec (containers, volumes, the service account token's projection)
// is most of a pod and is only ever written, by the create: a running pod
// is never rewritten, and every write to a pod goes through a Delete or a
// read past the cache. Thousands of sandboxes' pods are then mostly their
// metadata.
func podTransform() toolscache.TransformFunc {
	return stripThen(func(pod *corev1.Pod) {
		pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName, HostAliases: pod.Spec.HostAliases}
		status := pod.Status
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodPhase(intern(string(status.Phase))), Reason: intern(status.Reason), Message: status.Message,
			PodIP: status.PodIP, Conditions: readConditions(status.Conditions),
			InitContainerStatuses: slimContainerStatuses(status.InitContainerStatuses),
			ContainerStatuses:     slimContainerStatuses(status.ContainerStatuses),
		}
	})
}

// readConditions are the pod conditions the controllers read, Ready and
// PodScheduled (environment.PodReady, Unschedulable, ScheduledAt), with
// their type, status and reason interned.
func readConditions(conditions []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.PodScheduled {
			c.Type, c.Status, c.Reason = corev1.PodConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status))), intern(c.Reason)
			out = append(out, c)
		}
	}
	return out
}

// slimContainerStatuses keeps of each status what the sandbox's status is
// told from: its name, state, last state, readiness and restarts, with a
// state's container ID dropped and its reason interned.
func slimContainerStatuses(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	for i, s := range statuses {
		statuses[i] = corev1.ContainerStatus{
			Name: intern(s.Name), State: slimState(s.State), LastTerminationState: slimState(s.LastTerminationState),
			Ready: s.Ready, RestartCount: s.RestartCount, Started: s.Started,
		}
	}
	return statuses
}

func slimState(state corev1.ContainerState) corev1.ContainerState {
	if w := state.Waiting; w != nil {
		w.Reason = intern(w.Reason)
	}
	if t := state.Terminated; t != nil {
		t.Reason, t.ContainerID = intern(t.Reason), ""
	}
	return state
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
