package config_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// TestGatewayServiceSelectsItsDeployment: the reconciler finds the gateway
// by the Service's name (v1alpha1.EgressGatewayName) and lets sandboxes
// reach the pods it selects on its target port: the Service must select
// the Deployment's pods and name a port they declare.
func TestGatewayServiceSelectsItsDeployment(t *testing.T) {
	objs, err := config.Gateway()
	if err != nil {
		t.Fatal(err)
	}
	var selector, podLabels map[string]any
	var target string
	var ports []any
	for _, o := range objs {
		switch o.GetKind() {
		case "Service":
			if o.GetName() != v1.EgressGatewayName || o.GetNamespace() != v1.SystemNamespace {
				t.Errorf("the gateway's Service is %s/%s, want %s/%s", o.GetNamespace(), o.GetName(), v1.SystemNamespace, v1.EgressGatewayName)
			}
			selector, _, _ = unstructured.NestedMap(o.Object, "spec", "selector")
			servicePorts, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
			if len(servicePorts) > 0 {
				target, _, _ = unstructured.NestedString(servicePorts[0].(map[string]any), "targetPort")
			}
		case "Deployment":
			podLabels, _, _ = unstructured.NestedMap(o.Object, "spec", "template", "metadata", "labels")
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(containers) > 0 {
				ports, _, _ = unstructured.NestedSlice(containers[0].(map[string]any), "ports")
			}
		}
	}
	if len(selector) == 0 {
		t.Fatal("config/gateway has no Service with a selector")
	}
	for k, v := range selector {
		if podLabels[k] != v {
			t.Errorf("the Service selects %s=%v, which the Deployment's pods (%v) do not carry", k, v, podLabels)
		}
	}
	declared := false
	for _, p := range ports {
		if name, _, _ := unstructured.NestedString(p.(map[string]any), "name"); name == target {
			declared = true
		}
	}
	if !declared {
		t.Errorf("the Service's target port %q is not a port the gateway's container declares (%v)", target, ports)
	}
}
