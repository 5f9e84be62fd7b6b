package v1alpha1_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestGitOpsExamplesAreValid decodes every example declaration strictly into
// the Go types (an unknown or misspelt field fails) and has the API server
// validate it with a server-side dry run, so the examples cannot rot.
func TestGitOpsExamplesAreValid(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	files, err := filepath.Glob("../../examples/gitops/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("want the example declarations, found %v (%v)", files, err)
	}
	files = append(files, "../../examples/agent-inside/template.yaml")
	kinds := map[string]bool{}
	for _, file := range files {
		objs, err := testcluster.ReadManifests(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			typed, err := kubescheme.Scheme.New(u.GroupVersionKind())
			if err != nil || u.GroupVersionKind().GroupVersion() != v1.GroupVersion {
				t.Errorf("%s: %s is not an agentsandbox.dev/v1alpha1 kind", file, u.GroupVersionKind())
				continue
			}
			data, err := json.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(data, typed); err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			kinds[u.GetKind()] = true
			if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
				client.DryRunAll, client.FieldOwner("agentsandbox-examples-test"), client.ForceOwnership); err != nil {
				t.Errorf("%s: server-side dry run: %v", file, err)
			}
		}
	}
	for _, kind := range []string{"NodePool", "SandboxTemplate", "WarmPool", "Sandbox"} {
		if !kinds[kind] {
			t.Errorf("no example declares a %s", kind)
		}
	}
}
