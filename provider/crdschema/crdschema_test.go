package crdschema

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"

	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// kinds loads every CRD; a CEL rule without a plan-time check fails here.
func kinds(t *testing.T) map[string]*Kind {
	t.Helper()
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Kind{}
	for _, c := range crds {
		k, err := Load(c)
		if err != nil {
			t.Fatal(err)
		}
		out[k.GVK.Kind] = k
	}
	if len(out) != 5 {
		t.Fatalf("loaded %d kinds, want 5", len(out))
	}
	return out
}

func TestEveryKindBuildsASchema(t *testing.T) {
	for name, k := range kinds(t) {
		spec, err := SpecAttribute(k, map[string]bool{"owner": true})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		s := schema.Schema{Attributes: map[string]schema.Attribute{"spec": spec}}
		if diags := s.ValidateImplementation(context.Background()); diags.HasError() {
			t.Errorf("%s: %v", name, diags)
		}
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"clusterDNS": "cluster_dns", "podIP": "pod_ip", "envVarsInjectionPolicy": "env_vars_injection_policy",
		"endPort": "end_port", "url": "url", "DNSName": "dns_name", "fsGroup": "fs_group",
	} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestExamplesRoundTrip converts every example declaration to Terraform
// values and back: nothing is lost or renamed on the way.
func TestExamplesRoundTrip(t *testing.T) {
	ks := kinds(t)
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"node-pool.yaml", "template.yaml", "warm-pool.yaml", "sandbox.yaml"} {
		objs, err := testcluster.ReadManifests(root + "/examples/gitops/" + file)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			k := ks[obj.GetKind()]
			spec, err := SpecAttribute(k, nil)
			if err != nil {
				t.Fatal(err)
			}
			typ := spec.GetType().TerraformType(context.Background())
			yamlSpec := obj.Object["spec"].(map[string]any)
			v, err := FromJSON(yamlSpec, k.Spec, typ)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			back, err := ToJSON(v, k.Spec)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if diff := cmp.Diff(normalise(yamlSpec), back); diff != "" {
				t.Errorf("%s: round trip (-yaml +back):\n%s", file, diff)
			}
		}
	}
}

// normalise gives decoded YAML the number type ToJSON produces.
func normalise(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalise(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normalise(e)
		}
	case float64:
		return int64(v)
	}
	return v
}
