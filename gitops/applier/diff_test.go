package applier

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

func TestFieldChanges(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"team": "a"}, "uid": "ignored"},
		"spec":     map[string]any{"image": "python:3.12", "ports": []any{map[string]any{"containerPort": int64(80)}}, "gone": true},
	}}
	merged := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"team": "a", "tier": "x"}, "uid": "other"},
		"spec":     map[string]any{"image": "python:3.13", "ports": []any{map[string]any{"containerPort": int64(80)}}},
	}}
	got := strings.Join(fieldChanges(live, merged), "\n")
	want := strings.Join([]string{
		`metadata.labels.tier: (unset) → "x"`,
		`spec.gone: true → (unset)`,
		`spec.image: "python:3.12" → "python:3.13"`,
	}, "\n")
	if got != want {
		t.Errorf("fieldChanges:\n%s\nwant:\n%s", got, want)
	}
}

// TestDecide: the dry run's result is compared with the trimmed live
// object as ssa compares: labels, annotations and everything outside
// metadata and status, whatever the order of keys.
func TestDecide(t *testing.T) {
	obj := func(labels map[string]any, spec, status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agentsandbox.dev/v1alpha1", "kind": "SandboxTemplate",
			"metadata": map[string]any{"name": "t", "resourceVersion": "7", "generation": int64(3), "labels": labels,
				"managedFields": []any{map[string]any{"manager": "x"}}},
			"spec": spec, "status": status,
		}}
	}
	spec := func() map[string]any {
		return map[string]any{"image": "python:3.12", "ports": []any{map[string]any{"name": "http", "containerPort": int64(80)}}}
	}
	live := newLiveContent(obj(map[string]any{"team": "a"}, spec(), map[string]any{"observedGeneration": int64(3)}), false)
	d := declarations.Declaration{Object: obj(nil, nil, nil), File: "t.yaml", Doc: 1}

	cases := []struct {
		name   string
		merged *unstructured.Unstructured
		want   ssa.Action
	}{
		{"same spec, other status", obj(map[string]any{"team": "a"}, spec(), map[string]any{"observedGeneration": int64(2)}), ssa.UnchangedAction},
		{"spec changed", obj(map[string]any{"team": "a"}, map[string]any{"image": "python:3.13", "ports": spec()["ports"]}, nil), ssa.ConfiguredAction},
		{"label added", obj(map[string]any{"team": "a", "tier": "x"}, spec(), nil), ssa.ConfiguredAction},
		{"label changed", obj(map[string]any{"team": "b"}, spec(), nil), ssa.ConfiguredAction},
		{"label removed", obj(nil, spec(), nil), ssa.ConfiguredAction},
	}
	for _, c := range cases {
		if got := decide(d, live, c.merged); got.Action != c.want {
			t.Errorf("%s: %s, want %s", c.name, got.Action, c.want)
		}
	}
	created := obj(nil, spec(), nil)
	created.SetResourceVersion("")
	if got := decide(d, nil, created); got.Action != ssa.CreatedAction {
		t.Errorf("no resourceVersion after the dry run: %s, want created", got.Action)
	}
	if got := decide(d, live, cases[0].merged); got.Generation != 3 {
		t.Errorf("unchanged object's generation %d, want the live 3", got.Generation)
	}
	unlabelled := newLiveContent(obj(nil, spec(), nil), false)
	if got := decide(d, unlabelled, obj(map[string]any{}, spec(), nil)); got.Action != ssa.UnchangedAction {
		t.Errorf("no labels against an empty map of them: %s, want unchanged", got.Action)
	}
	full := newLiveContent(obj(map[string]any{"team": "a"}, spec(), nil), true)
	if got := decide(d, full, cases[1].merged); strings.Join(got.Fields, "\n") != `spec.image: "python:3.12" → "python:3.13"` {
		t.Errorf("field changes with the full live object: %q", got.Fields)
	}
	if full.full.GetManagedFields() != nil {
		t.Error("the full live object keeps its managed fields")
	}
}

// TestKeepsDeclaredMetadata: a live object keeps its declared metadata
// while it has every declared label and annotation with its value,
// whatever else it has.
func TestKeepsDeclaredMetadata(t *testing.T) {
	decl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agentsandbox.dev/v1alpha1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": "t", "labels": map[string]any{"team": "a"}, "annotations": map[string]any{"owner": "alice"}},
	}}
	bare := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agentsandbox.dev/v1alpha1", "kind": "SandboxTemplate", "metadata": map[string]any{"name": "t"},
	}}
	live := func(labels, annotations map[string]string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Name: "t", Labels: labels, Annotations: annotations}
	}
	cases := []struct {
		name string
		live *metav1.ObjectMeta
		decl *unstructured.Unstructured
		want bool
	}{
		{"as declared", live(map[string]string{"team": "a"}, map[string]string{"owner": "alice"}), decl, true},
		{"more than declared", live(map[string]string{"team": "a", "x": "y"}, map[string]string{"owner": "alice", "note": "hi"}), decl, true},
		{"label removed", live(nil, map[string]string{"owner": "alice"}), decl, false},
		{"label changed", live(map[string]string{"team": "b"}, map[string]string{"owner": "alice"}), decl, false},
		{"annotation removed", live(map[string]string{"team": "a"}, nil), decl, false},
		{"nothing declared", live(nil, nil), bare, true},
		{"not declared", live(map[string]string{"team": "a"}, nil), nil, false},
	}
	for _, c := range cases {
		if got := newLiveObject(c.live, c.decl).KeepsDeclaredMetadata; got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
