package applier

import (
	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// TestSetOwner: every declaration gets the ownership label, its own labels
// are kept, and the map declarations without labels share is not changed
// through a copy of one of them, nor by labelling them again.
func TestSetOwner(t *testing.T) {
	plain, other := declared("a"), declared("b")
	labelled := declared("c")
	labelled.SetLabels(map[string]string{"team": "z"})
	decls := []declarations.Declaration{{Object: plain}, {Object: other}, {Object: labelled}}
	SetOwner(decls, "one")
	for _, d := range decls {
		if got := d.Object.GetLabels()[v1.LabelGitSync]; got != "one" {
			t.Errorf("%s: owner label %q", d.Object.GetName(), got)
		}
	}
	if labelled.GetLabels()["team"] != "z" {
		t.Errorf("own labels lost: %v", labelled.GetLabels())
	}

	applied := plain.DeepCopy()
	applied.SetLabels(map[string]string{v1.LabelGitSync: "one", "added": "x"})
	unstructured.RemoveNestedField(applied.Object, "metadata", "labels", v1.LabelGitSync)
	if got := other.GetLabels(); len(got) != 1 || got[v1.LabelGitSync] != "one" {
		t.Errorf("a copy's change reached another declaration: %v", got)
	}

	SetOwner(decls[:1], "two")
	if got := other.GetLabels()[v1.LabelGitSync]; got != "one" {
		t.Errorf("relabelling one declaration relabelled another: %q", got)
	}
	if got := plain.GetLabels()[v1.LabelGitSync]; got != "two" {
		t.Errorf("relabelled: %q", got)
	}
}
