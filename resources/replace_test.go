package resources_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
)

// TestAccSandboxReplacedForItsOwner: changing a sandbox's owner replaces
// it, and the plan right after that apply is empty (the harness fails a
// step whose post-apply plan is not), as is one after a refresh.
func TestAccSandboxReplacedForItsOwner(t *testing.T) {
	tpl, name := testcluster.Name("tpl"), testcluster.Name("owned")
	cfg := func(owner string) string {
		return acctest.ProviderConfig(t) + templateHCL("a", tpl, "ghcr.io/acme/python:3.12") + fmt.Sprintf(`
resource "agentsandbox_sandbox" "test" {
  name = %q
  spec = {
    template_ref = { name = agentsandbox_template.a.name }
    owner        = %q
  }
}
`, name, owner)
	}
	addr := "agentsandbox_sandbox.test"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{
			{Config: cfg("alice@example.com")},
			{
				Config: cfg("bob@example.com"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace),
				}},
			},
			{Config: cfg("bob@example.com"), RefreshState: false, PlanOnly: true},
		},
	})
}
