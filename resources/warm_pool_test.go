package resources_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

func TestAccWarmPool(t *testing.T) {
	tpl := testcluster.Name("tpl")
	names := []string{testcluster.Name("wp"), "", testcluster.Name("wp")}
	names[1] = names[0]
	replicas := []int{2, 3, 3}
	lifecycle{
		typeName: "warm_pool",
		name:     func(v int) string { return names[v] },
		config: func(v int) string {
			return templateHCL("tpl", tpl, "ghcr.io/acme/python:3.12") + fmt.Sprintf(`
resource "agentsandbox_warm_pool" "test" {
  name = %q
  spec = {
    template_ref = { name = agentsandbox_template.tpl.name }
    replicas     = %d
  }
}
`, names[v], replicas[v])
		},
		changedPath:  tfjsonpath.New("spec").AtMapKey("replicas"),
		changedValue: knownvalue.Int64Exact(3),
		// The update waited for the third member (state keeps the status
		// read before the update; the cluster has the new one).
		updated: func(t *testing.T, name string) error {
			ready, _, _ := unstructured.NestedInt64(acctest.Live(t, "warm_pool", name).Object, "status", "readyReplicas")
			if ready != 3 {
				return fmt.Errorf("warm pool %s has %d ready members right after the update, want 3", name, ready)
			}
			return nil
		},
		drift:      `{"spec":{"replicas":1}}`,
		driftField: []string{"spec", "replicas"},
		want:       2,
		leftovers: func(t *testing.T, name string) []string {
			return acctest.NamespacesLabelled(t, v1.LabelWarmPool, name)
		},
	}.run(t)
}
