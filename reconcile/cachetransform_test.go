package reconcile

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// cachedTemplate is a template as the API server lists it after the
// template controller has checked it, managed fields included.
const cachedTemplate = `{"apiVersion":"agentsandbox.dev/v1alpha1","kind":"SandboxTemplate",
"metadata":{"name":"python-%d","uid":"824f571d-169f-4f4e-ab5e-%012d","resourceVersion":"%d","generation":1,
 "creationTimestamp":"2026-12-01T03:40:47Z","labels":{"agentsandbox.dev/gitsync":"templates"},
 "managedFields":[{"manager":"agentsandbox","operation":"Apply","apiVersion":"agentsandbox.dev/v1alpha1","time":"2026-12-01T03:40:47Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:image":{}}}}]},
"spec":{"image":"python:3.12","imagePullPolicy":"IfNotPresent","envVarsInjectionPolicy":"Disallowed","network":{"clusterDNS":true},
 "resources":{"limits":{"cpu":"%s","memory":"1Gi"},"requests":{"cpu":"100m","memory":"128Mi"}},
 "securityContext":{"fsGroup":65532,"runAsGroup":65532,"runAsUser":65532},"workspace":{"mountPath":"/workspace","persistent":false,"size":"1Gi"}},
"status":{"observedGeneration":1,"contentHash":"0d43ff2b031f85c5",
 "conditions":[{"type":"Ready","status":"True","reason":"Valid","message":"template is valid","observedGeneration":1,"lastTransitionTime":"2026-12-01T03:40:47Z"}]}}`

// decodeTemplates decodes n templates, the i-th with cpu(i) as its cpu
// limit, and passes each through transform as the informer would.
func decodeTemplates(t testing.TB, n int, cpu func(int) string, transform func(any) (any, error)) []*v1.SandboxTemplate {
	t.Helper()
	decoder := serializer.NewCodecFactory(kubescheme.Scheme).UniversalDeserializer()
	out := make([]*v1.SandboxTemplate, n)
	for i := range out {
		tpl := &v1.SandboxTemplate{}
		if _, _, err := decoder.Decode(fmt.Appendf(nil, cachedTemplate, i, i, i, cpu(i)), nil, tpl); err != nil {
			t.Fatal(err)
		}
		obj, err := transform(tpl)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = obj.(*v1.SandboxTemplate)
	}
	return out
}

func sameMap(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestTemplateTransformSharesEqualMaps(t *testing.T) {
	cpus := []string{"1", "1000m", "2"}
	got := decodeTemplates(t, 3, func(i int) string { return cpus[i] }, templateTransform())
	for _, tpl := range got {
		if tpl.ManagedFields != nil {
			t.Errorf("%s: managed fields kept", tpl.Name)
		}
	}
	if !sameMap(got[0].Spec.Resources.Requests, got[2].Spec.Resources.Requests) {
		t.Error("equal requests are not shared")
	}
	// 1000m is 1 written another way: the list is written out as "1"
	// either way.
	if !sameMap(got[0].Spec.Resources.Limits, got[1].Spec.Resources.Limits) {
		t.Error("limits of cpu 1 and 1000m are not shared")
	}
	if sameMap(got[0].Spec.Resources.Limits, got[2].Spec.Resources.Limits) {
		t.Error("limits of cpu 1 and 2 are shared")
	}
	if !sameMap(got[0].Labels, got[2].Labels) {
		t.Error("equal labels are not shared")
	}
	if cpu := got[2].Spec.Resources.Limits.Cpu().String(); cpu != "2" {
		t.Errorf("cpu limit of the third template = %s, want 2", cpu)
	}
	// What a controller reads from the cache is a deep copy: changing it
	// leaves the shared list alone.
	copied := got[0].DeepCopy()
	delete(copied.Spec.Resources.Limits, "memory")
	if _, ok := got[1].Spec.Resources.Limits["memory"]; !ok {
		t.Error("a deep copy's change reached the shared list")
	}
}

func TestTemplateTransformKeepsAtMostMaxSharedLists(t *testing.T) {
	transform := templateTransform()
	distinct := func(i int) string { return fmt.Sprintf("%dm", i+1) }
	first := decodeTemplates(t, maxShared+10, distinct, transform)
	again := decodeTemplates(t, maxShared+10, distinct, transform)
	// Requests and limits share one store of lists, and the requests are
	// the same list everywhere: they hold one of its places.
	kept := 1
	for i := range again {
		if sameMap(first[i].Spec.Resources.Limits, again[i].Spec.Resources.Limits) {
			kept++
		}
	}
	if kept != maxShared {
		t.Errorf("%d lists kept for sharing, want %d", kept, maxShared)
	}
}

// BenchmarkTemplateCacheMemory reports the heap 10,000 cached templates
// hold, each declaring the same resources, as the informer keeps them with
// the managed fields stripped, and with their labels and resource lists shared
// too.
func BenchmarkTemplateCacheMemory(b *testing.B) {
	strip := func(obj any) (any, error) {
		obj.(*v1.SandboxTemplate).ManagedFields = nil
		return obj, nil
	}
	for _, bc := range []struct {
		name      string
		transform func() func(any) (any, error)
	}{
		{"strip-managed-fields", func() func(any) (any, error) { return strip }},
		{"share-maps", func() func(any) (any, error) { return templateTransform() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const n = 10000
			var before, after runtime.MemStats
			for range b.N {
				runtime.GC()
				runtime.ReadMemStats(&before)
				kept := decodeTemplates(b, n, func(int) string { return "1" }, bc.transform())
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-bytes/template")
		})
	}
}

// TestPodTransformKeepsWhatControllersRead: a sandbox's pod keeps its
// metadata, node, and of its status the phase, message, IP, Ready and
// PodScheduled conditions and container statuses cut to what the
// sandbox's status is told from; it loses the rest of its spec and status.
func TestPodTransformKeepsWhatControllersRead(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC))
	status := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: name, Image: "python:3.12", ImageID: "docker.io/library/python@sha256:0", ContainerID: "containerd://0",
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", ContainerID: "containerd://1"}},
			Ready:                true, RestartCount: 2, Started: ptr.To(true),
			VolumeMounts: []corev1.VolumeMountStatus{{Name: "workspace", MountPath: "/workspace"}},
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "sandbox", Namespace: "sandbox-a", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{v1.LabelManagedBy: v1.ManagedByValue}, Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "agentsandbox"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", RuntimeClassName: ptr.To("gvisor"),
			Containers:  []corev1.Container{{Name: "sandbox", Image: "python:3.12", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}},
			Volumes:     []corev1.Volume{{Name: "workspace"}},
			HostAliases: []corev1.HostAlias{{IP: "10.96.0.5", Hostnames: []string{"vllm.models"}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.5", Message: "m",
			PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}, HostIP: "192.168.0.2", HostIPs: []corev1.HostIP{{IP: "192.168.0.2"}},
			QOSClass: corev1.PodQOSGuaranteed, StartTime: &started,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
			},
			InitContainerStatuses: []corev1.ContainerStatus{status("gate")},
			ContainerStatuses:     []corev1.ContainerStatus{status("sandbox")},
		},
	}
	want := pod.DeepCopy()
	want.ManagedFields = nil
	want.Spec = corev1.PodSpec{NodeName: "node-1", HostAliases: pod.Spec.HostAliases}
	want.Status.PodIPs, want.Status.HostIP, want.Status.HostIPs, want.Status.QOSClass, want.Status.StartTime = nil, "", nil, "", nil
	want.Status.Conditions = want.Status.Conditions[1:]
	for _, s := range []*corev1.ContainerStatus{&want.Status.InitContainerStatuses[0], &want.Status.ContainerStatuses[0]} {
		s.Image, s.ImageID, s.ContainerID, s.VolumeMounts = "", "", "", nil
		s.LastTerminationState.Terminated.ContainerID = ""
	}
	checkTransform(t, podTransform(), pod, want)
}

// TestNodeTransformKeepsWhatNodePoolsRead: a node keeps its labels, taints,
// conditions and the record of the taints a pool set, and loses its other
// annotations and status.
func TestNodeTransformKeepsWhatNodePoolsRead(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-1", UID: "u", ResourceVersion: "9", Labels: map[string]string{v1.LabelNodePool: "gvisor"},
			Annotations: map[string]string{v1.AnnotationOwnedTaints: `[{"key":"k","effect":"NoSchedule"}]`, "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:     []corev1.ContainerImage{{Names: []string{"python:3.12"}, SizeBytes: 1 << 30}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"},
		},
	}
	want := node.DeepCopy()
	want.Annotations = map[string]string{v1.AnnotationOwnedTaints: node.Annotations[v1.AnnotationOwnedTaints]}
	want.Status = corev1.NodeStatus{Conditions: node.Status.Conditions}
	checkTransform(t, nodeTransform(), node, want)
}

// TestQuotaAndLimitRangeTransformsShareLists: equal resource lists of two
// sandboxes' quotas and limit ranges are one map, their values kept, and
// a quota's status (the API server's count) is dropped.
func TestQuotaAndLimitRangeTransformsShareLists(t *testing.T) {
	list := func(cpu string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
	}
	quotas, limits := quotaTransform(), limitRangeTransform()
	var gotQuotas []*corev1.ResourceQuota
	var gotLimits []*corev1.LimitRange
	for i, cpu := range []string{"1", "1000m", "2"} {
		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: fmt.Sprint("sandbox-", i), ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "agentsandbox"}}},
			Spec:       corev1.ResourceQuotaSpec{Hard: list(cpu)},
			Status:     corev1.ResourceQuotaStatus{Hard: list(cpu), Used: list("0")},
		}
		obj, err := quotas(quota)
		if err != nil {
			t.Fatal(err)
		}
		gotQuotas = append(gotQuotas, obj.(*corev1.ResourceQuota))
		limitRange := &corev1.LimitRange{
			ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: fmt.Sprint("sandbox-", i)},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
				Type: corev1.LimitTypeContainer, Max: list(cpu), Default: list(cpu), DefaultRequest: list("100m"),
			}}},
		}
		if obj, err = limits(limitRange); err != nil {
			t.Fatal(err)
		}
		gotLimits = append(gotLimits, obj.(*corev1.LimitRange))
	}
	for _, q := range gotQuotas {
		if q.ManagedFields != nil || q.Status.Hard != nil || q.Status.Used != nil {
			t.Errorf("%s: managed fields or status kept: %+v", q.Namespace, q)
		}
	}
	if !sameMap(gotQuotas[0].Spec.Hard, gotQuotas[1].Spec.Hard) || sameMap(gotQuotas[0].Spec.Hard, gotQuotas[2].Spec.Hard) {
		t.Error("quotas: equal lists not shared, or unequal ones shared")
	}
	first, third := gotLimits[0].Spec.Limits[0], gotLimits[2].Spec.Limits[0]
	if !sameMap(first.Max, first.Default) || !sameMap(first.Max, gotLimits[1].Spec.Limits[0].Max) || !sameMap(first.DefaultRequest, third.DefaultRequest) {
		t.Error("limit ranges: equal lists not shared")
	}
	if sameMap(first.Max, third.Max) {
		t.Error("limit ranges: lists of cpu 1 and 2 shared")
	}
	if cpu := gotQuotas[2].Spec.Hard.Cpu().String(); cpu != "2" {
		t.Errorf("third quota's cpu = %s, want 2", cpu)
	}
	if cpu := third.Max.Cpu().String(); cpu != "2" {
		t.Errorf("third limit range's max cpu = %s, want 2", cpu)
	}
}

// checkTransform passes in through transform and compares the result with
// want.
func checkTransform(t *testing.T, transform func(any) (any, error), in, want any) {
	t.Helper()
	got, err := transform(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("transformed %T (-want +got):\n%s", in, diff)
	}
}

// sameString tells whether a and b are one copy in memory.
func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// checkShared fails for each pair of equal strings that are two copies.
func checkShared(t *testing.T, pairs [][2]string) {
	t.Helper()
	for _, pair := range pairs {
		if !sameString(pair[0], pair[1]) {
			t.Errorf("%q: two copies", pair[0])
		}
	}
}

// transformAll decodes format filled in with each of args, as an
// informer would (each string a copy of its own), passes each object
// through transform, checks that it lost its managed fields alone, and
// returns the objects.
func transformAll[T interface {
	kruntime.Object
	metav1.Object
}](t *testing.T, transform func(any) (any, error), format string, newObject func() T, args ...any) []T {
	t.Helper()
	decoder := serializer.NewCodecFactory(kubescheme.Scheme).UniversalDeserializer()
	var out []T
	for _, arg := range args {
		obj := newObject()
		if _, _, err := decoder.Decode(fmt.Appendf(nil, format, arg), nil, obj); err != nil {
			t.Fatal(err)
		}
		want := obj.DeepCopyObject().(T)
		want.SetManagedFields(nil)
		checkTransform(t, transform, obj, want)
		out = append(out, obj)
	}
	return out
}

// TestNamespaceTransformInternsWhatRepeats: two sandboxes' namespaces keep
// every label, annotation, owner and finalizer, the strings alike across
// them are one copy, and each sandbox's own name stays its own.
func TestNamespaceTransformInternsWhatRepeats(t *testing.T) {
	const namespace = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"sandbox-%[1]s","uid":"u-%[1]s",
 "labels":{"app.kubernetes.io/managed-by":"agentsandbox","agentsandbox.dev/sandbox":"%[1]s","agentsandbox.dev/template":"python",
  "kubernetes.io/metadata.name":"sandbox-%[1]s","pod-security.kubernetes.io/enforce":"restricted"},
 "annotations":{"agentsandbox.dev/owner":"dev@example.com"},
 "ownerReferences":[{"apiVersion":"agentsandbox.dev/v1alpha1","kind":"Sandbox","name":"%[1]s","uid":"s-%[1]s","controller":true}],
 "managedFields":[{"manager":"agentsandbox","operation":"Apply"}]},
"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}`
	got := transformAll(t, namespaceTransform(), namespace, func() *corev1.Namespace { return &corev1.Namespace{} }, "a", "b")
	a, b := got[0], got[1]
	for key := range a.Labels {
		k := keyIn(b.Labels, key)
		if !sameString(key, k) {
			t.Errorf("label key %s: two copies", key)
		}
		switch key {
		case v1.LabelSandbox, corev1.LabelMetadataName:
			if a.Labels[key] == b.Labels[key] {
				t.Errorf("label %s: %q on both", key, a.Labels[key])
			}
		default:
			if !sameString(a.Labels[key], b.Labels[key]) {
				t.Errorf("label %s=%s: two copies of the value", key, a.Labels[key])
			}
		}
	}
	checkShared(t, [][2]string{
		{a.Annotations[v1.AnnotationOwner], b.Annotations[v1.AnnotationOwner]},
		{a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion},
		{a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		{string(a.Spec.Finalizers[0]), string(b.Spec.Finalizers[0])},
		{string(a.Status.Phase), string(b.Status.Phase)},
	})
}

// keyIn is m's own copy of key.
func keyIn(m map[string]string, key string) string {
	for k := range m {
		if k == key {
			return k
		}
	}
	return ""
}

// TestNetworkPolicyTransformSharesEqualSpecs: two sandboxes' policies of
// one template hold one spec, with its content; a third template's
// policy keeps its own.
func TestNetworkPolicyTransformSharesEqualSpecs(t *testing.T) {
	const policy = `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"sandbox","namespace":"sandbox-%[1]d",
 "labels":{"app.kubernetes.io/managed-by":"agentsandbox"}},
"spec":{"podSelector":{},"policyTypes":["Ingress","Egress"],"egress":[{"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}},
 "podSelector":{"matchLabels":{"k8s-app":"kube-dns"}}}],"ports":[{"protocol":"UDP","port":53},{"protocol":"TCP","port":%[1]d}]}]}}`
	got := transformAll(t, networkPolicyTransform(), policy, func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} }, 53, 53, 443)
	if &got[0].Spec.Egress[0] != &got[1].Spec.Egress[0] {
		t.Error("equal specs not shared")
	}
	if !sameMap(got[0].Labels, got[2].Labels) {
		t.Error("equal labels, every value alike across objects, not one map")
	}
	if &got[0].Spec.Egress[0] == &got[2].Spec.Egress[0] {
		t.Error("unequal specs shared")
	}
	if port := got[2].Spec.Egress[0].Ports[1].Port.IntValue(); port != 443 {
		t.Errorf("third policy's port = %d, want 443", port)
	}
}

// TestRoleBindingTransformInternsSubjectsAndRole: two sandboxes' bindings
// of one owner keep their subjects and role, each string one copy.
func TestRoleBindingTransformInternsSubjectsAndRole(t *testing.T) {
	const binding = `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"owner","namespace":"sandbox-%d"},
"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"dev@example.com"}],
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"agentsandbox-sandbox-owner"}}`
	got := transformAll(t, roleBindingTransform(), binding, func() *rbacv1.RoleBinding { return &rbacv1.RoleBinding{} }, 1, 2)
	a, b := got[0], got[1]
	checkShared(t, [][2]string{
		{a.Subjects[0].Name, b.Subjects[0].Name}, {a.Subjects[0].APIGroup, b.Subjects[0].APIGroup},
		{a.RoleRef.Name, b.RoleRef.Name}, {a.RoleRef.Kind, b.RoleRef.Kind}, {a.RoleRef.APIGroup, a.Subjects[0].APIGroup},
	})
}

// TestSandboxTransformInternsWhatRepeats: two Sandboxes of one owner and
// template keep their content, and their owner, template, phase and
// condition strings are one copy.
func TestSandboxTransformInternsWhatRepeats(t *testing.T) {
	const sandbox = `{"apiVersion":"agentsandbox.dev/v1alpha1","kind":"Sandbox","metadata":{"name":"s-%d","namespace":"dev"},
"spec":{"templateRef":{"name":"python"},"owner":"dev@example.com","state":"Running"},
"status":{"phase":"Running","namespace":"sandbox-s-%[1]d","podName":"sandbox","launchType":"Cold",
 "conditions":[{"type":"Ready","status":"True","reason":"Running","message":"m","lastTransitionTime":"2026-12-05T02:00:00Z"}]}}`
	got := transformAll(t, sandboxTransform(), sandbox, func() *v1.Sandbox { return &v1.Sandbox{} }, 1, 2)
	a, b := got[0], got[1]
	checkShared(t, [][2]string{
		{a.Spec.Owner, b.Spec.Owner}, {a.Spec.TemplateRef.Name, b.Spec.TemplateRef.Name}, {string(a.Spec.State), string(b.Spec.State)},
		{string(a.Status.Phase), string(b.Status.Phase)}, {a.Status.PodName, b.Status.PodName}, {string(a.Status.LaunchType), string(b.Status.LaunchType)},
		{a.Status.Conditions[0].Type, b.Status.Conditions[0].Type}, {a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason},
		{string(a.Status.Conditions[0].Status), string(b.Status.Conditions[0].Status)},
	})
}

// TestInformersKeepNoNamespaceIndex: the cache's informers keep the field
// indexes they are given and not controller-runtime's index by namespace.
func TestInformersKeepNoNamespaceIndex(t *testing.T) {
	byName := func(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Name}, nil }
	informer := newInformerWithoutNamespaceIndex(&toolscache.ListWatch{}, &corev1.Pod{}, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc, "field:name": byName})
	if got := slices.Sorted(maps.Keys(informer.GetIndexer().GetIndexers())); !slices.Equal(got, []string{"field:name"}) {
		t.Errorf("indexes %v, want [field:name]", got)
	}
}
