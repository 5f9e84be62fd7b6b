package config_test

import (
	"slices"
	"strings"
	"testing"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
)

func TestCRDsAreEveryKind(t *testing.T) {
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, crd := range crds {
		if crd.Spec.Group != v1.GroupVersion.Group {
			t.Errorf("CRD %s: group %s", crd.Name, crd.Spec.Group)
		}
		kinds = append(kinds, crd.Spec.Names.Kind)
	}
	want := slices.Clone(v1.Kinds)
	slices.Sort(want)
	slices.Sort(kinds)
	if !slices.Equal(kinds, want) {
		t.Errorf("CRDs of %v, want one per kind %v", kinds, want)
	}
}

func TestAdmissionHasPoliciesAndBindings(t *testing.T) {
	objs, err := config.Admission()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, o := range objs {
		seen[o.GetKind()]++
	}
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ConfigMap"} {
		if seen[kind] == 0 {
			t.Errorf("config/admission has no %s (has %v)", kind, seen)
		}
	}
}

func TestParseManifestsNamesTheSource(t *testing.T) {
	objs, err := config.ParseManifests("a.yaml", []byte("kind: A\n---\n\n---\nkind: B\n"))
	if err != nil || len(objs) != 2 || objs[1].GetKind() != "B" {
		t.Errorf("two documents and an empty one: %v, %v", objs, err)
	}
	if _, err := config.ParseManifests("broken.yaml", []byte("kind: [\n")); err == nil || !strings.HasPrefix(err.Error(), "broken.yaml: ") {
		t.Errorf("a broken document: %v, want an error naming broken.yaml", err)
	}
}
