package resources_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestAccEphemeralSandboxReopenedUnderItsName: OpenTofu opens an ephemeral
// resource during plan, closes it, and opens it again during apply. With a
// fixed name the second sandbox is created while the first one's namespace
// (sandbox-<name>) may still be terminating. Every time a sandbox of that
// name turns Ready, a watch checks that its namespace is live and its own
// (labelled with its UID), and the run must have opened at least two.
func TestAccEphemeralSandboxReopenedUnderItsName(t *testing.T) {
	cluster := testcluster.Get(t)
	tpl, eph := testcluster.Name("reopen"), testcluster.Name("fixed")
	namespace := "sandbox-" + eph

	w, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: kubescheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watcher, err := w.Watch(ctx, &v1.SandboxList{}, client.MatchingFields{"metadata.name": eph})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		ready    = map[types.UID]bool{}
		problems []string
	)
	go func() {
		for ev := range watcher.ResultChan() {
			sbx, ok := ev.Object.(*v1.Sandbox)
			if !ok || !meta.IsStatusConditionTrue(sbx.Status.Conditions, v1.ReadyCondition) {
				continue
			}
			mu.Lock()
			seen := ready[sbx.UID]
			ready[sbx.UID] = true
			mu.Unlock()
			if seen {
				continue
			}
			ns := &corev1.Namespace{}
			problem := ""
			switch err := cluster.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); {
			case err != nil:
				problem = fmt.Sprintf("sandbox %s is Ready but its namespace %s cannot be read: %v", sbx.UID, namespace, err)
			case ns.DeletionTimestamp != nil:
				problem = fmt.Sprintf("sandbox %s is Ready in namespace %s, which is terminating", sbx.UID, namespace)
			case ns.Labels[v1.LabelSandboxUID] != string(sbx.UID):
				problem = fmt.Sprintf("sandbox %s is Ready in namespace %s of sandbox %s", sbx.UID, namespace, ns.Labels[v1.LabelSandboxUID])
			}
			if problem != "" {
				mu.Lock()
				problems = append(problems, problem)
				mu.Unlock()
			}
		}
	}()

	platform := acctest.ProviderConfig(t) + templateHCL("python", tpl, "ghcr.io/acme/python:3.12")
	config := platform + fmt.Sprintf(`
ephemeral "agentsandbox_sandbox" "fixed" {
  name     = %q
  template = agentsandbox_template.python.name
  ttl      = "15m"
}

provider "echo" {
  data = ephemeral.agentsandbox_sandbox.fixed
}

resource "echo" "fixed" {}
`, eph)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{{
			// The template first: an ephemeral resource that depends on
			// something the same run still creates is opened during apply
			// only.
			Config: platform,
		}, {
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("echo.fixed", tfjsonpath.New("data").AtMapKey("name"), knownvalue.StringExact(eph)),
				statecheck.ExpectKnownValue("echo.fixed", tfjsonpath.New("data").AtMapKey("namespace"), knownvalue.StringExact(namespace)),
				statecheck.ExpectKnownValue("echo.fixed", tfjsonpath.New("data").AtMapKey("launch_type"), knownvalue.StringExact("Cold")),
			},
			Check: func(*terraform.State) error {
				mu.Lock()
				defer mu.Unlock()
				if len(problems) > 0 {
					return fmt.Errorf("a reopened sandbox was handed out in the wrong namespace: %v", problems)
				}
				if len(ready) < 2 {
					return fmt.Errorf("the run opened %d sandboxes named %s; plan and apply should have opened one each", len(ready), eph)
				}
				return nil
			},
		}},
	})
}
