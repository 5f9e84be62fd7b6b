package reconcile

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer"

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
	first := decodeTemplates(t, maxSharedMaps+10, distinct, transform)
	again := decodeTemplates(t, maxSharedMaps+10, distinct, transform)
	// Requests and limits share one store of lists, and the requests are
	// the same list everywhere: they hold one of its places.
	kept := 1
	for i := range again {
		if sameMap(first[i].Spec.Resources.Limits, again[i].Spec.Resources.Limits) {
			kept++
		}
	}
	if kept != maxSharedMaps {
		t.Errorf("%d lists kept for sharing, want %d", kept, maxSharedMaps)
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
