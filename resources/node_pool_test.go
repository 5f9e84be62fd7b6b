package resources_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

func TestAccNodePool(t *testing.T) {
	group := testcluster.Name("acc-group")
	testcluster.Get(t).Node(t, map[string]string{"agentsandbox.dev/node-group": group},
		corev1.Taint{Key: "agentsandbox.dev/runtime", Value: "gvisor", Effect: corev1.TaintEffectNoSchedule})
	name := testcluster.Name("np")
	handlers := []string{"runsc", "runsc", "kata-qemu"}
	cpu := []string{"100m", "250m", "250m"}
	lifecycle{
		typeName: "node_pool",
		name:     func(int) string { return name },
		config: func(v int) string {
			return fmt.Sprintf(`
resource "agentsandbox_node_pool" "test" {
  name = %q
  spec = {
    runtime_handler = %q
    node_selector   = { "agentsandbox.dev/node-group" = %q }
    taints          = [{ key = "agentsandbox.dev/runtime", value = "gvisor" }]
    overhead        = { cpu = %q, memory = "64Mi" }
  }
}
`, name, handlers[v], group, cpu[v])
		},
		changedPath:  tfjsonpath.New("spec").AtMapKey("overhead").AtMapKey("cpu"),
		changedValue: knownvalue.StringExact("250m"),
		drift:        `{"spec":{"overhead":{"cpu":"900m"}}}`,
		driftField:   []string{"spec", "overhead", "cpu"},
		want:         "100m",
	}.run(t)
}
