package provider_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
)

// unreachable is a provider configuration whose cluster cannot be reached:
// the invalid configurations below fail at plan without contacting it.
const unreachable = `
provider "agentsandbox" {
  host  = "https://127.0.0.1:1"
  token = "unused"
}
`

// TestInvalidConfigurationsFailAtPlan checks that every kind of CRD
// constraint is caught by tofu plan, offline, with a message naming the
// attribute.
func TestInvalidConfigurationsFailAtPlan(t *testing.T) {
	template := func(spec string) string {
		return `resource "agentsandbox_template" "t" {
  name = "python"
  spec = {
    image = "ghcr.io/acme/python:3.12"
    ` + spec + `
  }
}`
	}
	cases := []struct {
		name, config, want string
	}{
		{"negative replicas", `resource "agentsandbox_warm_pool" "p" {
  name = "python"
  spec = { template_ref = { name = "python" }, replicas = -1 }
}`, `spec.replicas value must be between 0 and`},
		{"image reference", `resource "agentsandbox_template" "t" {
  name = "python"
  spec = { image = "Not An Image" }
}`, `spec.image must be an image reference`},
		{"reserved label", `resource "agentsandbox_template" "t" {
  name   = "python"
  labels = { "agentsandbox.dev/team" = "a" }
  spec   = { image = "python:3.12" }
}`, `label "agentsandbox.dev/team": keys under agentsandbox.dev/ are set by the agentsandbox\s+reconciler`},
		{"reserved annotation", `resource "agentsandbox_sandbox" "s" {
  name        = "alice"
  annotations = { "kubectl.kubernetes.io/last-applied-configuration" = "{}" }
  spec        = { template_ref = { name = "a" } }
}`, `annotation\s+"kubectl.kubernetes.io/last-applied-configuration": keys under\s+kubectl.kubernetes.io/`},
		{"pull policy enum", template(`image_pull_policy = "Sometimes"`), `spec.image_pull_policy value must be one of`},
		{"env name", template(`env = [{ name = "9LIVES", value = "x" }]`), `spec.env\[0\].name`},
		{"egress CIDR", template(`network = { egress = [{ cidr = "10.0.0.0/33" }] }`), `spec.network.egress\[0\].cidr must be a CIDR`},
		{"egress host", template(`network = { egress = [{ hosts = ["https://pypi.org"] }] }`),
			`spec.network.egress\[0\].hosts\[0\] must be a host name such as pypi.org or a wildcard`},
		{"egress cidr and hosts", template(`network = { egress = [{ cidr = "0.0.0.0/0", hosts = ["pypi.org"] }] }`),
			`spec.network.egress\[0\] must set exactly one of cidr, hosts, service`},
		{"endpoint URL", template(`network = { endpoints = [{ name = "openai", url = "ftp://api.openai.com" }] }`),
			`spec.network.endpoints\[0\].url must be an http or https URL`},
		{"endpoint without a secret key", template(`network = { endpoints = [{ name = "openai", url = "https://api.openai.com", credential = { secret_ref = { name = "openai" } } }] }`),
			`secret_ref`},
		{"port range", template(`network = { egress = [{ cidr = "0.0.0.0/0", ports = [{ port = 9000, end_port = 8000 }] }] }`),
			`spec.network.egress\[0\].ports\[0\].end_port must not be lower than port`},
		{"request above limit", template(`resources = { requests = { cpu = "2" }, limits = { cpu = "1" } }`),
			`spec.resources.requests "cpu" must be less than or equal to limits\["cpu"\]`},
		{"unknown resource", template(`resources = { limits = { "nvidia.com/gpu" = "1" } }`), `spec.resources.limits`},
		{"quantity", template(`resources = { limits = { cpu = "lots" } }`), `spec.resources.limits\["cpu"\] must be a quantity`},
		{"storage class without persistence", template(`workspace = { storage_class_name = "fast" }`),
			`spec.workspace.storage_class_name needs persistent = true`},
		{"duplicate port", template(`ports = [{ container_port = 8888 }, { container_port = 8888, protocol = "TCP" }]`),
			`spec.ports elements must be unique by container_port, protocol`},
		{"empty command entry", template(`command = ["sleep", ""]`), `spec.command\[1\] string length must be at least 1`},
		{"ingress peer without labels", template(`network = { ingress_from = [{ ports = [{ port = 80 }] }] }`),
			`spec.network.ingress_from\[0\] must set at least one of namespace_labels, pod_labels`},
		{"both refs", `resource "agentsandbox_sandbox" "s" {
  name = "alice"
  spec = { template_ref = { name = "a" }, warm_pool_ref = { name = "b" } }
}`, `spec must set exactly one of template_ref, warm_pool_ref`},
		{"ttl and shutdown time", `resource "agentsandbox_sandbox" "s" {
  name = "alice"
  spec = { template_ref = { name = "a" }, ttl = "1h", shutdown_time = "2030-01-01T00:00:00Z" }
}`, `spec must set at most one of shutdown_time, ttl`},
		{"duration", `resource "agentsandbox_sandbox" "s" {
  name = "alice"
  spec = { template_ref = { name = "a" }, ttl = "2 hours" }
}`, `spec.ttl must be a duration such as 90s, 30m or 8h, got: "2 hours"`},
		{"sandbox name too long", `resource "agentsandbox_sandbox" "s" {
  name = "` + strings.Repeat("a", 56) + `"
  spec = { template_ref = { name = "a" } }
}`, `name is 56 characters long but must be at most 55 characters long \(the sandbox's namespace is named sandbox-<name>, and a namespace name has at most 63 characters\)`},
		{"name not a DNS label", `resource "agentsandbox_node_pool" "n" {
  name = "GVisor_Pool"
  spec = { runtime_handler = "runsc", node_selector = { pool = "gvisor" } }
}`, `name must be a DNS label`},
		{"taint effect", `resource "agentsandbox_node_pool" "n" {
  name = "gvisor"
  spec = { runtime_handler = "runsc", node_selector = { pool = "gvisor" }, taints = [{ key = "k", effect = "Sometimes" }] }
}`, `spec.taints\[0\].effect value must be one of`},
		{"git path escape", `resource "agentsandbox_git_sync" "g" {
  name = "platform"
  spec = { url = "https://git.example.com/x.git", path = "clusters/../../etc" }
}`, `spec.path must stay inside the repository`},
		{"git ref", `resource "agentsandbox_git_sync" "g" {
  name = "platform"
  spec = { url = "https://git.example.com/x.git", ref = { branch = "main", tag = "v1" } }
}`, `spec.ref must set exactly one of branch, tag, commit, got 2`},
		{"ephemeral sandbox source", `ephemeral "agentsandbox_sandbox" "s" {
  warm_pool = "python"
  template  = "python"
}`, `Exactly one of these attributes must be configured: \[warm_pool,template\]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: acctest.Factories,
				Steps: []resource.TestStep{{
					Config:   unreachable + tc.config,
					PlanOnly: true,
					// The CLI wraps messages: any space may be a line break.
					ExpectError: regexp.MustCompile(strings.ReplaceAll(tc.want, " ", `\s+`)),
				}},
			})
		})
	}
}

// TestPlanErrorsPointAtTheAttribute: the snippet under a plan-time error is
// the line of the offending attribute's key in spec, not the resource's
// first line or another attribute of the same name (see placingServer).
func TestPlanErrorsPointAtTheAttribute(t *testing.T) {
	cases := []struct {
		name, config string
		// line is the snippet line the error must show, message a part of
		// the message, both regular expressions.
		line, message string
	}{
		{"spec attribute", `resource "agentsandbox_sandbox" "s" {
  name = "alice"
  spec = {
    template_ref = { name = "python" }
    ttl          = "5 minutes"
  }
}`, `\d+:\s+ttl\s+= "5 minutes"`, `spec\.ttl must be a duration`},
		{"nested name, not the resource's name", `resource "agentsandbox_sandbox" "s" {
  name = "alice"
  spec = {
    template_ref = { name = "Python_3" }
  }
}`, `\d+:\s+template_ref = \{ name = "Python_3" \}`, `spec\.template_ref\.name must be a DNS label`},
		{"deep in a list", `resource "agentsandbox_template" "t" {
  name = "python"
  spec = {
    image = "python:3.12"
    network = {
      egress = [{ cidr = "10.0.0.0/33" }]
    }
  }
}`, `\d+:\s+network = \{`, `spec\.network\.egress\[0\]\.cidr must be a CIDR`},
		{"label key", `resource "agentsandbox_template" "t" {
  name   = "python"
  labels = { "agentsandbox.dev/team" = "a" }
  spec   = { image = "python:3.12" }
}`, `\d+:\s+labels = \{ "agentsandbox\.dev/team" = "a" \}`, `keys under agentsandbox\.dev/`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: acctest.Factories,
				Steps: []resource.TestStep{{
					Config:      unreachable + tc.config,
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`(?s)` + tc.line + `\s*\n.*` + strings.ReplaceAll(tc.message, " ", `\s+`)),
				}},
			})
		})
	}
}
