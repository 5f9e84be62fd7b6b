package applier

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// TestWaitHealthyWaitsForTheCache: health read from a cache is judged only
// on a version at least as new as the one the sync listed or applied. The
// cache here is a fake client, standing in for an informer cache that
// lags; the GitSync tests run the real one.
func TestWaitHealthyWaitsForTheCache(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	stalled := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Generation: 1}}
	stalled.Status.ObservedGeneration = 1
	conditions.MarkStalled(stalled, "InvalidImage", "image cannot be pulled")
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stalled).Build()
	a := New(cache).WithHealthCache(cache)
	decls := []declarations.Declaration{{Object: declared("t"), File: "t.yaml", Doc: 1}}
	cached := &v1.SandboxTemplate{}
	if err := cache.Get(context.Background(), client.ObjectKey{Name: "t"}, cached); err != nil {
		t.Fatal(err)
	}
	key := KeyOf(decls[0])

	// The listing saw the version after the cached one: the cached Stalled
	// status is about the past, so the wait waits instead of failing, and
	// judges the newer version once the cache has it.
	newer := Live{key: {ResourceVersion: next(t, cached.ResourceVersion)}}
	done := make(chan error, 1)
	go func() { done <- a.WaitHealthy(context.Background(), decls, newer, 10*time.Millisecond) }()
	select {
	case err := <-done:
		t.Fatalf("judged the cached version older than the listing's: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	conditions.Delete(cached, "Stalled")
	conditions.MarkTrue(cached, v1.ReadyCondition, "Valid", "valid")
	if err := cache.Update(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the newer version is Ready: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the cache got the listed version")
	}

	// As new as the listing: judged, and a failure ends the wait at once.
	conditions.Delete(cached, v1.ReadyCondition)
	conditions.MarkStalled(cached, "InvalidImage", "image cannot be pulled")
	if err := cache.Update(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	current := Live{key: {ResourceVersion: cached.ResourceVersion}}
	if err := a.WaitHealthy(context.Background(), decls, current, time.Hour); err == nil || !strings.Contains(err.Error(), "image cannot be pulled") {
		t.Errorf("the listed version is Stalled: %v", err)
	}

	gone := []declarations.Declaration{{Object: declared("gone"), File: "gone.yaml", Doc: 1}}
	if err := a.WaitHealthy(context.Background(), gone, nil, time.Hour); err == nil || !strings.Contains(err.Error(), `"gone" is not on the cluster`) {
		t.Errorf("an object neither listed nor cached: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	applied := Live{KeyOf(gone[0]): {ResourceVersion: "5"}}
	if err := a.WaitHealthy(ctx, gone, applied, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "the cache has not seen resourceVersion 5 yet") {
		t.Errorf("an object applied but not in the cache yet: %v", err)
	}
	// Read from the API server, which is never behind, missing is missing.
	if err := New(cache).WaitHealthy(context.Background(), gone, applied, time.Hour); err == nil || !strings.Contains(err.Error(), `"gone" is not on the cluster`) {
		t.Errorf("an object listed but gone from the API server: %v", err)
	}
}

func TestOlder(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"5", "10", true},
		{"10", "5", false},
		{"7", "7", false},
		{"", "5", false},
		{"x1", "5", false},
	}
	for _, c := range cases {
		if got := older(c.a, c.b); got != c.want {
			t.Errorf("older(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func declared(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1.GroupVersion.WithKind("SandboxTemplate"))
	u.SetName(name)
	return u
}

// next is a resourceVersion just after rv.
func next(t *testing.T, rv string) string {
	t.Helper()
	n, err := strconv.Atoi(rv)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an integer", rv)
	}
	return strconv.Itoa(n + 1)
}

// BenchmarkHealthOf: judging a cached template, as each pass of the health
// wait does for every declared object.
func BenchmarkHealthOf(b *testing.B) {
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Generation: 1, ResourceVersion: "7"}}
	tpl.Spec.Image = "python:3.12"
	tpl.Status.ObservedGeneration = 1
	conditions.MarkTrue(tpl, v1.ReadyCondition, "Valid", "valid")
	gvk := v1.GroupVersion.WithKind("SandboxTemplate")
	for b.Loop() {
		if s := healthOf(tpl, gvk); !s.healthy {
			b.Fatal(s.why)
		}
	}
}
