package resources_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestAccReplacementLeavesAnEmptyPlan changes each attribute that forces a
// replacement and that the lifecycle tests do not (they change a
// template's, pool's and GitSync's name, a sandbox's template_ref and a
// node pool's runtime_handler): the apply replaces the object, the plan
// right after it is empty (the harness fails a step whose post-apply plan
// is not), and so is one after a refresh.
func TestAccReplacementLeavesAnEmptyPlan(t *testing.T) {
	// Each case's sandbox has dependencies of its own (the cases run side
	// by side): a template that lets a sandbox add variables, and two pools
	// of it.
	sandbox := func(name, spec string) string {
		return fmt.Sprintf(`
resource "agentsandbox_template" "a" {
  name = %q
  spec = {
    image                     = "ghcr.io/acme/python:3.12"
    command                   = ["sleep", "infinity"]
    env_vars_injection_policy = "Allowed"
  }
}
resource "agentsandbox_warm_pool" "a" {
  name = %q
  spec = { template_ref = { name = agentsandbox_template.a.name }, replicas = 1 }
}
resource "agentsandbox_warm_pool" "b" {
  name = %q
  spec = { template_ref = { name = agentsandbox_template.a.name }, replicas = 1 }
}
resource "agentsandbox_sandbox" "test" {
  name = %q
  spec = %s
}
`, name+"-tpl", name+"-a", name+"-b", name, spec)
	}
	group := testcluster.Name("acc-group")
	testcluster.Get(t).Node(t, map[string]string{"agentsandbox.dev/node-group": group})
	nodePool := func(name string) string {
		return fmt.Sprintf(`
resource "agentsandbox_node_pool" "test" {
  name = %q
  spec = {
    runtime_handler = "runsc"
    node_selector   = { "agentsandbox.dev/node-group" = %q }
  }
}
`, name, group)
	}
	sbx := testcluster.Name("sbx")
	onTemplate := `{ template_ref = { name = agentsandbox_template.a.name }, owner = "alice@example.com" }`
	for _, tc := range []struct {
		name, typeName string
		from, to       string
	}{
		{"sandbox owner", "sandbox", sandbox(sbx+"-o", onTemplate),
			sandbox(sbx+"-o", `{ template_ref = { name = agentsandbox_template.a.name }, owner = "bob@example.com" }`)},
		{"sandbox env", "sandbox",
			sandbox(sbx+"-e", `{ template_ref = { name = agentsandbox_template.a.name }, owner = "alice@example.com", env = [{ name = "MODE", value = "a" }] }`),
			sandbox(sbx+"-e", `{ template_ref = { name = agentsandbox_template.a.name }, owner = "alice@example.com", env = [{ name = "MODE", value = "b" }] }`)},
		{"sandbox warm_pool_ref", "sandbox",
			sandbox(sbx+"-p", `{ warm_pool_ref = { name = agentsandbox_warm_pool.a.name }, owner = "alice@example.com" }`),
			sandbox(sbx+"-p", `{ warm_pool_ref = { name = agentsandbox_warm_pool.b.name }, owner = "alice@example.com" }`)},
		{"sandbox template_ref to warm_pool_ref", "sandbox", sandbox(sbx+"-t", onTemplate),
			sandbox(sbx+"-t", `{ warm_pool_ref = { name = agentsandbox_warm_pool.a.name }, owner = "alice@example.com" }`)},
		{"sandbox name", "sandbox", sandbox(sbx+"-n", onTemplate),
			strings.ReplaceAll(sandbox(sbx+"-n", onTemplate), `name = "`+sbx+`-n"`, `name = "`+sbx+`-m"`)},
		{"node pool name", "node_pool", nodePool(testcluster.Name("np")), nodePool(testcluster.Name("np"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := "agentsandbox_" + tc.typeName + ".test"
			provider := acctest.ProviderConfig(t)
			resource.ParallelTest(t, resource.TestCase{
				ProtoV6ProviderFactories: acctest.Factories,
				Steps: []resource.TestStep{
					{Config: provider + tc.from},
					{
						Config: provider + tc.to,
						ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
							plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace),
						}},
					},
					{Config: provider + tc.to, RefreshState: false, PlanOnly: true},
				},
			})
		})
	}
}
