package applier

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
