package provider_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestAccEndToEnd applies a gVisor node pool, a template on it, a warm pool
// of 3 and a sandbox claimed from the pool in one apply, all Ready; reads
// them back through the data sources; claims a throwaway sandbox with the
// ephemeral resource; and destroys everything, leaving nothing behind.
func TestAccEndToEnd(t *testing.T) {
	prefix := testcluster.Name("e2e")
	pool, tpl, wp, sbx, eph := prefix+"-gvisor", prefix+"-python", prefix+"-python", prefix+"-alice", prefix+"-ci"
	platform := fmt.Sprintf(`
resource "agentsandbox_node_pool" "gvisor" {
  name = %[1]q
  spec = {
    runtime_handler = "runsc"
    node_selector   = { "agentsandbox.dev/node-group" = "gvisor" }
    taints          = [{ key = "agentsandbox.dev/runtime", value = "gvisor", effect = "NoSchedule" }]
    overhead        = { cpu = "100m", memory = "64Mi" }
  }
}

resource "agentsandbox_template" "python" {
  name = %[2]q
  spec = {
    image         = "docker.io/library/python:3.12-slim"
    command       = ["sleep", "infinity"]
    env           = [{ name = "PIP_DISABLE_PIP_VERSION_CHECK", value = "1" }]
    resources     = { requests = { cpu = "250m", memory = "256Mi" }, limits = { cpu = "2", memory = "2Gi" } }
    node_pool_ref = { name = agentsandbox_node_pool.gvisor.name }
    network = {
      egress = [{ cidr = "0.0.0.0/0", ports = [{ port = 443 }] }]
    }
  }
}

resource "agentsandbox_warm_pool" "python" {
  name = %[3]q
  spec = {
    template_ref = { name = agentsandbox_template.python.name }
    replicas     = 3
  }
}

resource "agentsandbox_sandbox" "alice" {
  name = %[4]q
  spec = {
    warm_pool_ref = { name = agentsandbox_warm_pool.python.name }
    owner         = "alice@example.com"
    ttl           = "2h"
  }
}
`, pool, tpl, wp, sbx)
	reads := fmt.Sprintf(`
data "agentsandbox_warm_pool" "python" {
  name = agentsandbox_warm_pool.python.name
}

data "agentsandbox_template" "python" {
  name = agentsandbox_template.python.name
}

data "agentsandbox_sandbox" "alice" {
  name = agentsandbox_sandbox.alice.name
}

data "agentsandbox_sandboxes" "alices" {
  owner    = "alice@example.com"
  template = agentsandbox_template.python.name
  state    = "Running"
}

data "agentsandbox_sandboxes" "none" {
  warm_pool = "%s-no-such-pool"
}
`, prefix)
	throwaway := fmt.Sprintf(`
ephemeral "agentsandbox_sandbox" "ci" {
  name      = %q
  warm_pool = agentsandbox_warm_pool.python.name
  ttl       = "15m"
}

provider "echo" {
  data = ephemeral.agentsandbox_sandbox.ci
}

resource "echo" "ci" {}
`, eph)
	config := acctest.ProviderConfig(t) + platform
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(*terraform.State) error {
			for typeName, name := range map[string]string{"node_pool": pool, "template": tpl, "warm_pool": wp, "sandbox": sbx} {
				if err := acctest.Gone(t, typeName, name); err != nil {
					return err
				}
			}
			// Destroy opens the ephemeral sandbox once more, and its release
			// leaves the namespace to garbage collection.
			testcluster.Eventually(t, "namespace of the last ephemeral sandbox deleted", func() (bool, string) {
				left := acctest.NamespacesLabelled(t, v1.LabelSandbox, eph)
				return len(left) == 0, fmt.Sprint(left)
			})
			if left := append(acctest.NamespacesLabelled(t, v1.LabelWarmPool, wp), acctest.NamespacesLabelled(t, v1.LabelSandbox, sbx)...); len(left) > 0 {
				return fmt.Errorf("left behind: %v", left)
			}
			err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: pool}, &nodev1.RuntimeClass{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("RuntimeClass %s still exists (%v)", pool, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("agentsandbox_node_pool.gvisor", tfjsonpath.New("status").AtMapKey("runtime_class_name"), knownvalue.StringExact(pool)),
					statecheck.ExpectKnownValue("agentsandbox_warm_pool.python", tfjsonpath.New("status").AtMapKey("ready_replicas"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue("agentsandbox_sandbox.alice", tfjsonpath.New("status").AtMapKey("launch_type"), knownvalue.StringExact("Warm")),
					statecheck.ExpectKnownValue("agentsandbox_sandbox.alice", tfjsonpath.New("status").AtMapKey("phase"), knownvalue.StringExact("Running")),
					statecheck.ExpectKnownValue("agentsandbox_sandbox.alice", tfjsonpath.New("status").AtMapKey("namespace"), knownvalue.NotNull()),
				},
			},
			{
				Config: config + reads,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.agentsandbox_warm_pool.python", tfjsonpath.New("spec").AtMapKey("replicas"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue("data.agentsandbox_template.python", tfjsonpath.New("spec").AtMapKey("node_pool_ref").AtMapKey("name"), knownvalue.StringExact(pool)),
					statecheck.ExpectKnownValue("data.agentsandbox_sandbox.alice", tfjsonpath.New("status").AtMapKey("launch_type"), knownvalue.StringExact("Warm")),
					statecheck.ExpectKnownValue("data.agentsandbox_sandboxes.alices", tfjsonpath.New("sandboxes"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact(sbx)}),
					})),
					statecheck.ExpectKnownValue("data.agentsandbox_sandboxes.none", tfjsonpath.New("sandboxes"), knownvalue.ListSizeExact(0)),
				},
			},
			{
				Config: config + throwaway,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("echo.ci", tfjsonpath.New("data").AtMapKey("name"), knownvalue.StringExact(eph)),
					statecheck.ExpectKnownValue("echo.ci", tfjsonpath.New("data").AtMapKey("launch_type"), knownvalue.StringExact("Warm")),
					statecheck.ExpectKnownValue("echo.ci", tfjsonpath.New("data").AtMapKey("namespace"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue("echo.ci", tfjsonpath.New("data").AtMapKey("owner"), knownvalue.StringExact("kwok-admin")),
				},
				// The run released the sandbox when it closed the ephemeral
				// resource.
				Check: func(*terraform.State) error {
					if acctest.Live(t, "sandbox", eph) != nil {
						return fmt.Errorf("ephemeral sandbox %s still exists after the run", eph)
					}
					testcluster.Eventually(t, "namespace of the ephemeral sandbox deleted", func() (bool, string) {
						left := acctest.NamespacesLabelled(t, v1.LabelSandbox, eph)
						return len(left) == 0, fmt.Sprint(left)
					})
					return nil
				},
			},
		},
	})
}
