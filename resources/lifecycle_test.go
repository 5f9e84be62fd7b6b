package resources_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// lifecycle is the acceptance test every resource type passes: create, an
// empty plan, import, drift repaired, an in-place update, a replacement,
// an out-of-band delete recreated, and a destroy that leaves nothing.
type lifecycle struct {
	typeName string
	// config renders the resource (and what it needs) at a version: 0 is
	// the base, 1 changes a field in place, 2 changes one that forces
	// replacement.
	config func(version int) string
	// name is the object's name at each version.
	name func(version int) string
	// changed is the attribute the in-place update sets and its value.
	changedPath  tfjsonpath.Path
	changedValue knownvalue.Check
	// updated, when set, checks the cluster right after the update.
	updated func(t *testing.T, name string) error
	// drift changes the object as kubectl edit would; driftField reads the
	// field it changed, and want is the configured value.
	drift      string
	driftField []string
	want       any
	// waitOptIn: the type does not wait for ready unless asked
	// (wait_for_ready defaults to false), so a create may record no status.
	waitOptIn bool
	// leftovers lists what an object of the type leaves behind if deletion
	// is incomplete.
	leftovers func(t *testing.T, name string) []string
}

// run takes the object through its lifecycle, in parallel with the other
// lifecycles: each names its objects apart (testcluster.Name), and most of
// a step is waiting on the reconciler and the namespace controller.
func (l lifecycle) run(t *testing.T) {
	addr := "agentsandbox_" + l.typeName + ".test"
	cfg := func(v int) string { return acctest.ProviderConfig(t) + l.config(v) }
	created := []statecheck.StateCheck{
		statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(l.name(0))),
	}
	if !l.waitOptIn {
		// Waiting for ready means the reconciler has written a status.
		created = append(created, statecheck.ExpectKnownValue(addr, tfjsonpath.New("status"), knownvalue.NotNull()))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(*terraform.State) error {
			for v := 0; v <= 2; v++ {
				if err := l.gone(t, l.name(v)); err != nil {
					return err
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: cfg(0),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: created,
			},
			{
				Config:           cfg(0),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				Config:            cfg(0),
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     l.name(0),
				ImportStateVerify: true,
				// status moves on its own (timestamps, counters).
				ImportStateVerifyIgnore: []string{"status"},
			},
			{
				PreConfig: func() { acctest.PatchOutOfBand(t, l.typeName, l.name(0), l.drift) },
				Config:    cfg(0),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					u := acctest.Live(t, l.typeName, l.name(0))
					got, _, _ := unstructured.NestedFieldNoCopy(u.Object, l.driftField...)
					if fmt.Sprint(got) != fmt.Sprint(l.want) {
						return fmt.Errorf("%v is %v after apply, want %v", l.driftField, got, l.want)
					}
					return nil
				},
			},
			{
				Config: cfg(1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					statusKnownInPlan{addr},
				}},
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(addr, l.changedPath, l.changedValue)},
				Check: func(*terraform.State) error {
					if l.updated == nil {
						return nil
					}
					return l.updated(t, l.name(1))
				},
			},
			{
				Config: cfg(2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				Check: func(*terraform.State) error {
					if l.name(2) != l.name(1) {
						return l.gone(t, l.name(1))
					}
					return nil
				},
			},
			{
				PreConfig: func() { acctest.DeleteOutOfBand(t, l.typeName, l.name(2)) },
				Config:    cfg(2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
			},
		},
	})
}

// gone fails when the object or anything it owned is still there.
func (l lifecycle) gone(t *testing.T, name string) error {
	if err := acctest.Gone(t, l.typeName, name); err != nil {
		return err
	}
	if l.leftovers != nil {
		if left := l.leftovers(t, name); len(left) > 0 {
			return fmt.Errorf("%s %s left %v behind", l.typeName, name, left)
		}
	}
	return nil
}

// templateHCL is a small valid template.
func templateHCL(address, name, image string) string {
	return fmt.Sprintf(`
resource "agentsandbox_template" %q {
  name = %q
  spec = {
    image   = %q
    command = ["sleep", "infinity"]
    network = {
      egress = [{ cidr = "0.0.0.0/0", ports = [{ port = 443 }] }]
    }
  }
}
`, address, name, image)
}

// TestAccConflictWithAnotherDeclaration: a field another server-side apply
// manager (a GitSync, another configuration) declares is not fought over:
// apply fails and names that manager.
func TestAccConflictWithAnotherDeclaration(t *testing.T) {
	name := testcluster.Name("tpl")
	config := acctest.ProviderConfig(t) + templateHCL("test", name, "ghcr.io/acme/python:3.12")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             func(*terraform.State) error { return lifecycle{typeName: "template"}.gone(t, name) },
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: func() {
					u := acctest.Live(t, "template", name)
					u.SetManagedFields(nil)
					u.SetResourceVersion("")
					delete(u.Object, "status")
					if err := unstructured.SetNestedField(u.Object, "ghcr.io/acme/python:3.14", "spec", "image"); err != nil {
						t.Fatal(err)
					}
					if err := testcluster.Get(t).Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
						client.FieldOwner("agentsandbox-gitsync"), client.ForceOwnership); err != nil {
						t.Fatalf("apply as another manager: %v", err)
					}
				},
				Config:      config,
				ExpectError: regexp.MustCompile(`declared with\s+server-side apply by agentsandbox-gitsync; keep each object in one place`),
			},
		},
	})
}

// TestAccMissingReferenceFailsTheApply: an object that names another which
// does not exist (and which nothing in the apply creates) fails the apply
// once the reference has stayed missing for referenceGrace, saying which,
// instead of waiting out the create timeout.
func TestAccMissingReferenceFailsTheApply(t *testing.T) {
	missing := testcluster.Name("missing")
	cases := []struct{ name, typeName, config string }{
		{"sandbox", "sandbox", `
resource "agentsandbox_sandbox" "test" {
  name     = %q
  spec     = { template_ref = { name = %q } }
  timeouts = { create = "5m" }
}`},
		{"warm pool", "warm_pool", `
resource "agentsandbox_warm_pool" "test" {
  name     = %q
  spec     = { template_ref = { name = %q }, replicas = 1 }
  timeouts = { create = "5m" }
}`},
		{"template", "template", `
resource "agentsandbox_template" "test" {
  name     = %q
  spec     = { image = "python:3.12", node_pool_ref = { name = %q } }
  timeouts = { create = "5m" }
}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := testcluster.Name("ref")
			resource.ParallelTest(t, resource.TestCase{
				ProtoV6ProviderFactories: acctest.Factories,
				CheckDestroy:             func(*terraform.State) error { return lifecycle{typeName: tc.typeName}.gone(t, name) },
				Steps: []resource.TestStep{{
					Config:      acctest.ProviderConfig(t) + fmt.Sprintf(tc.config, name, missing),
					ExpectError: regexp.MustCompile(`cannot become ready:[\s\S]*"` + missing + `"[\s\S]*does\s+not\s+exist[\s\S]*\(for\s+3\ds;\s+nothing\s+created\s+it\)`),
				}},
			})
		})
	}
}

// statusKnownInPlan fails when an update plans the resource's status as
// "known after apply": Terraform would then print the whole status, every
// condition as removed, in a plan that changes two fields.
type statusKnownInPlan struct{ addr string }

func (c statusKnownInPlan) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.addr || rc.Change == nil {
			continue
		}
		if unknown, ok := rc.Change.AfterUnknown.(map[string]any); ok && anyUnknown(unknown["status"]) {
			resp.Error = fmt.Errorf("%s: the update plans status as (known after apply): %v", c.addr, unknown["status"])
		}
		return
	}
	resp.Error = fmt.Errorf("%s is not in the plan", c.addr)
}

// anyUnknown reads a plan's after_unknown tree: true where a value is
// unknown, false or nested maps and lists of those where it is not.
func anyUnknown(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case map[string]any:
		for _, e := range v {
			if anyUnknown(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if anyUnknown(e) {
				return true
			}
		}
	}
	return false
}
