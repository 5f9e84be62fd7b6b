package v1alpha1_test

import (
	"slices"
	"testing"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// TestReferencesFollowTheApplyOrder: every reference's getter reads the
// kind it is declared on, and names a kind of an earlier apply stage, so
// applying stage by stage never leaves a reference dangling on the way.
func TestReferencesFollowTheApplyOrder(t *testing.T) {
	stage := func(kind string) int {
		return slices.IndexFunc(v1.ApplyStages, func(s []string) bool { return slices.Contains(s, kind) })
	}
	for _, ref := range v1.References {
		if stage(ref.From) <= stage(ref.To) || stage(ref.To) < 0 {
			t.Errorf("%s.%s names a %s, which is not applied before it", ref.From, ref.Field, ref.To)
		}
		obj, err := kubescheme.Scheme.New(v1.GroupVersion.WithKind(ref.From))
		if err != nil {
			t.Fatal(err)
		}
		_ = ref.Get(obj) // panics if the getter reads another kind
	}
	for _, kind := range v1.Kinds {
		if _, err := kubescheme.Scheme.New(v1.GroupVersion.WithKind(kind)); err != nil {
			t.Errorf("kind %s: %v", kind, err)
		}
	}
}
