package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// exampleKinds maps the objects examples/gitops declares to their
// Terraform types.
var exampleKinds = map[string]string{
	"NodePool": "node_pool", "SandboxTemplate": "template", "WarmPool": "warm_pool", "Sandbox": "sandbox",
}

// TestAccExamples applies every Terraform example of the docs against the
// cluster, then has a GitSync pull examples/gitops from a Git server, and
// checks that both produce exactly the same objects: the provider and the
// GitOps reconciler declare the same thing.
func TestAccExamples(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(pattern string) string {
		files, err := filepath.Glob(filepath.Join(root, "examples", pattern))
		if err != nil || len(files) == 0 {
			t.Fatalf("no examples match %s (%v)", pattern, err)
		}
		var out string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out += string(b) + "\n"
		}
		return out
	}
	resources := acctest.ProviderConfig(t) + read("resources/*/resource.tf")
	// The ephemeral example claims a sandbox from the pool on every run,
	// and the pool replaces it a few seconds later, so the data source
	// examples (the pool's Ready count among them) run in a step of their
	// own: in one with the ephemeral example, the count would rightly change
	// between the apply and the refresh after it.
	// The import blocks of the docs name the example resources: with
	// them in state already, OpenTofu checks their addresses and skips
	// them.
	withDataSources := resources + read("data-sources/*/data-source.tf") + read("resources/*/import-by-string-id.tf")
	withEphemeral := resources + read("ephemeral-resources/*/ephemeral-resource.tf")

	fromTerraform := map[string]any{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{
			{
				Config: resources,
				Check: func(*terraform.State) error {
					for kind, typeName := range exampleKinds {
						fromTerraform[kind] = acctest.Live(t, typeName, gitopsExample(t, root, kind).GetName()).Object["spec"]
					}
					return nil
				},
			},
			{
				// Step 1 claimed alice-scratch from the pool (or
				// cold-started it, if the pool was not Ready yet).
				PreConfig: func() { waitSettled(t, "python", "alice-scratch") },
				Config:    withDataSources,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownOutputValue("python_ready", knownvalue.StringExact("3/3")),
					statecheck.ExpectKnownOutputValue("alice_sandboxes", knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("alice-scratch")})),
					statecheck.ExpectKnownOutputValue("python_image", knownvalue.StringExact("localhost/agentsandbox/python:3.11")),
					statecheck.ExpectKnownValue("data.agentsandbox_sandbox.alice_scratch", tfjsonpath.New("status").AtMapKey("phase"), knownvalue.StringExact("Running")),
				},
			},
			{Config: withEphemeral},
		},
	})

	// Now the same objects from examples/gitops, pulled from a Git server
	// by an agentsandbox_git_sync that waits until they are applied and
	// healthy.
	repo := gittest.New(t, "", "")
	files := map[string]string{}
	paths, err := filepath.Glob(filepath.Join(root, "examples/gitops/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = string(b)
	}
	commit := repo.Commit("main", files)
	for kind, typeName := range exampleKinds {
		name := gitopsExample(t, root, kind).GetName()
		t.Cleanup(func() { acctest.DeleteOutOfBand(t, typeName, name) })
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{{
			Config: acctest.ProviderConfig(t) + fmt.Sprintf(`
resource "agentsandbox_git_sync" "examples" {
  name           = %q
  wait_for_ready = true
  spec = {
    url  = %q
    ref  = { branch = "main" }
    path = "./"
  }
}
`, testcluster.Name("examples"), repo.URL()),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("agentsandbox_git_sync.examples", tfjsonpath.New("status").AtMapKey("last_applied_revision"),
					knownvalue.StringExact("main@sha1:"+commit)),
			},
			Check: func(*terraform.State) error {
				for kind, typeName := range exampleKinds {
					got := acctest.Live(t, typeName, gitopsExample(t, root, kind).GetName()).Object["spec"]
					if diff := cmp.Diff(fromTerraform[kind], got); diff != "" {
						return fmt.Errorf("%s: Terraform example and examples/gitops differ (-terraform +gitsync):\n%s", kind, diff)
					}
				}
				return nil
			},
		}},
	})
}

// waitSettled waits until the sandbox runs and every member of the
// WarmPool is Ready, so nothing changes the pool while a step reads it.
func waitSettled(t *testing.T, pool, sandbox string) {
	t.Helper()
	testcluster.Eventually(t, "sandbox "+sandbox+" Running and WarmPool "+pool+" full", func() (bool, string) {
		p, s := acctest.Live(t, "warm_pool", pool), acctest.Live(t, "sandbox", sandbox)
		if p == nil || s == nil {
			return false, "not found"
		}
		ready, _, _ := unstructured.NestedInt64(p.Object, "status", "readyReplicas")
		want, _, _ := unstructured.NestedInt64(p.Object, "spec", "replicas")
		phase, _, _ := unstructured.NestedString(s.Object, "status", "phase")
		return ready == want && phase == "Running", fmt.Sprintf("pool %d of %d Ready, sandbox %q", ready, want, phase)
	})
}

// gitopsExample returns the object of a kind that examples/gitops declares.
func gitopsExample(t *testing.T, root, kind string) *unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "examples/gitops/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		objs, err := testcluster.ReadManifests(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() == kind {
				return o
			}
		}
	}
	t.Fatalf("examples/gitops declares no %s", kind)
	return nil
}

// TestAccAgentInsideExample applies examples/agent-inside/agent.tf and
// checks that the API server makes of examples/agent-inside/template.yaml
// exactly the template Terraform made: the two declare the same thing.
func TestAccAgentInsideExample(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	hcl, err := os.ReadFile(filepath.Join(root, "examples/agent-inside/agent.tf"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testcluster.ReadManifests(filepath.Join(root, "examples/agent-inside/template.yaml"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("examples/agent-inside/template.yaml: %d objects, %v", len(objs), err)
	}
	declared := objs[0]
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{{
			Config: acctest.ProviderConfig(t) + string(hcl),
			Check: func(*terraform.State) error {
				live := acctest.Live(t, "template", declared.GetName())
				if live == nil {
					return fmt.Errorf("template %s not found", declared.GetName())
				}
				// The YAML's spec, as the API server would store it in
				// place of Terraform's (defaults and all).
				fromYAML := live.DeepCopy()
				fromYAML.Object["spec"] = declared.Object["spec"]
				if err := testcluster.Get(t).Client.Update(context.Background(), fromYAML, client.DryRunAll); err != nil {
					return fmt.Errorf("template.yaml: dry run: %w", err)
				}
				if diff := cmp.Diff(live.Object["spec"], fromYAML.Object["spec"]); diff != "" {
					return fmt.Errorf("agent.tf and template.yaml differ (-terraform +yaml):\n%s", diff)
				}
				return nil
			},
		}},
	})
}
