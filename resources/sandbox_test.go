package resources_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

func TestAccSandbox(t *testing.T) {
	tpls := []string{testcluster.Name("tpl"), testcluster.Name("tpl")}
	name := testcluster.Name("sbx")
	ttls := []string{"2h", "3h", "3h"}
	lifecycle{
		typeName: "sandbox",
		name:     func(int) string { return name },
		config: func(v int) string {
			ref := "a"
			if v == 2 {
				ref = "b"
			}
			return templateHCL("a", tpls[0], "ghcr.io/acme/python:3.12") + templateHCL("b", tpls[1], "ghcr.io/acme/node:22") +
				fmt.Sprintf(`
resource "agentsandbox_sandbox" "test" {
  name = %q
  spec = {
    template_ref = { name = agentsandbox_template.%s.name }
    ttl          = %q
  }
}
`, name, ref, ttls[v])
		},
		changedPath:  tfjsonpath.New("spec").AtMapKey("ttl"),
		changedValue: knownvalue.StringExact("3h"),
		drift:        `{"spec":{"ttl":"5m"}}`,
		driftField:   []string{"spec", "ttl"},
		want:         "2h",
		leftovers: func(t *testing.T, name string) []string {
			return acctest.NamespacesLabelled(t, v1.LabelSandbox, name)
		},
	}.run(t)
}
