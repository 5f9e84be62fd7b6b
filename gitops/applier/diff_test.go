package applier

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa"
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
	live := newLiveObject(obj(map[string]any{"team": "a"}, spec(), map[string]any{"observedGeneration": int64(3)}), nil, false)
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
	unlabelled := newLiveObject(obj(nil, spec(), nil), nil, false)
	if got := decide(d, unlabelled, obj(map[string]any{}, spec(), nil)); got.Action != ssa.UnchangedAction {
		t.Errorf("no labels against an empty map of them: %s, want unchanged", got.Action)
	}
	full := newLiveObject(obj(map[string]any{"team": "a"}, spec(), nil), nil, true)
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
	obj := func(labels, annotations map[string]any) *unstructured.Unstructured {
		meta := map[string]any{"name": "t"}
		if labels != nil {
			meta["labels"] = labels
		}
		if annotations != nil {
			meta["annotations"] = annotations
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agentsandbox.dev/v1alpha1", "kind": "SandboxTemplate", "metadata": meta,
		}}
	}
	decl := obj(map[string]any{"team": "a"}, map[string]any{"owner": "alice"})
	cases := []struct {
		name string
		live *unstructured.Unstructured
		decl *unstructured.Unstructured
		want bool
	}{
		{"as declared", obj(map[string]any{"team": "a"}, map[string]any{"owner": "alice"}), decl, true},
		{"more than declared", obj(map[string]any{"team": "a", "x": "y"}, map[string]any{"owner": "alice", "note": "hi"}), decl, true},
		{"label removed", obj(nil, map[string]any{"owner": "alice"}), decl, false},
		{"label changed", obj(map[string]any{"team": "b"}, map[string]any{"owner": "alice"}), decl, false},
		{"annotation removed", obj(map[string]any{"team": "a"}, nil), decl, false},
		{"nothing declared", obj(nil, nil), obj(nil, nil), true},
		{"not declared", obj(map[string]any{"team": "a"}, nil), nil, false},
	}
	for _, c := range cases {
		if got := newLiveObject(c.live, c.decl, false).KeepsDeclaredMetadata; got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
