package resources_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

func TestAccGitSync(t *testing.T) {
	names := []string{testcluster.Name("gs"), "", testcluster.Name("gs")}
	names[1] = names[0]
	intervals := []string{"5m", "10m", "10m"}
	lifecycle{
		typeName:  "git_sync",
		waitOptIn: true,
		name:      func(v int) string { return names[v] },
		config: func(v int) string {
			return fmt.Sprintf(`
resource "agentsandbox_git_sync" "test" {
  name = %q
  spec = {
    url      = "https://git.example.com/platform/sandboxes.git"
    ref      = { branch = "main" }
    path     = "./clusters/dev"
    interval = %q
  }
}
`, names[v], intervals[v])
		},
		changedPath:  tfjsonpath.New("spec").AtMapKey("interval"),
		changedValue: knownvalue.StringExact("10m"),
		drift:        `{"spec":{"interval":"1h","suspend":true}}`,
		driftField:   []string{"spec", "interval"},
		want:         "5m",
	}.run(t)
}
