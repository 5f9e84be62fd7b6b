package bench_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// terraformMix is the 200 resources of BenchmarkTerraform200 by type.
// Node pools select no node, so they are applied without waiting; every
// other resource waits for Ready (40 warm members and 40 cold sandboxes).
var terraformMix = []struct {
	typeName string
	count    int
	body     func(i int) string
}{
	{"node_pool", 20, func(i int) string {
		return fmt.Sprintf(`runtime_handler = "runsc"
    node_selector = { "bench.agentsandbox.dev/none" = "np-%d" }`, i)
	}},
	{"template", 60, func(int) string {
		return `image = "ghcr.io/acme/python:3.12"
    command = ["sleep", "infinity"]`
	}},
	{"warm_pool", 40, func(i int) string {
		return fmt.Sprintf(`template_ref = { name = agentsandbox_template.r%d.name }
    replicas = 1`, i)
	}},
	{"sandbox", 40, func(i int) string {
		return fmt.Sprintf(`template_ref = { name = agentsandbox_template.r%d.name }
    ttl = "2h"`, 40+i%20)
	}},
	{"git_sync", 40, func(int) string {
		return `url = "https://git.example.com/platform/sandboxes.git"`
	}},
}

// BenchmarkTerraform200 applies 200 resources of every kind with OpenTofu
// and the provider binary (as a user runs them: dev_overrides, default
// parallelism 10), then times a refresh + plan of the unchanged
// configuration and the destroy. Run it once: make bench does
// (-benchtime 1x).
func BenchmarkTerraform200(b *testing.B) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	tofu := tofuCLI(b, root, work)
	prefix := testcluster.Name("tfb")
	var config strings.Builder
	fmt.Fprintf(&config, "terraform {\n  required_providers {\n    agentsandbox = { source = \"agentsandbox/agentsandbox\" }\n  }\n}\n"+
		"provider \"agentsandbox\" {\n  config_path = %q\n}\n", testcluster.Get(b).Kubeconfig)
	var mix []string
	for _, m := range terraformMix {
		mix = append(mix, fmt.Sprintf("%d %s", m.count, m.typeName))
		for i := 0; i < m.count; i++ {
			wait := ""
			if m.typeName == "node_pool" {
				wait = "\n  wait_for_ready = false"
			}
			fmt.Fprintf(&config, "resource \"agentsandbox_%s\" \"r%d\" {\n  name = \"%s-%s-%d\"%s\n  spec = {\n    %s\n  }\n}\n",
				m.typeName, i, prefix, strings.ReplaceAll(m.typeName, "_", ""), i, wait, m.body(i))
		}
	}
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(config.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Logf("resources: %s", strings.Join(mix, ", "))
	for b.Loop() {
		apply := tofu("apply", "-auto-approve", "-input=false")
		plan := tofu("plan", "-input=false", "-detailed-exitcode")
		destroy := tofu("destroy", "-auto-approve", "-input=false")
		b.ReportMetric(apply.Seconds(), "apply-s")
		b.ReportMetric(plan.Seconds(), "refresh+plan-s")
		b.ReportMetric(destroy.Seconds(), "destroy-s")
	}
}

// tofuCLI builds the provider binary, installs it for OpenTofu with a dev
// override, and returns a function that runs a tofu command in work and
// times it. A command that fails (or a plan that finds changes) fails the
// benchmark.
func tofuCLI(b *testing.B, root, work string) func(args ...string) time.Duration {
	bin := filepath.Join(work, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "terraform-provider-agentsandbox"), ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	rc := filepath.Join(work, "tofurc")
	override := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"registry.opentofu.org/agentsandbox/agentsandbox\" = %q\n  }\n  direct {}\n}\n", bin)
	if err := os.WriteFile(rc, []byte(override), 0o600); err != nil {
		b.Fatal(err)
	}
	dir, err := testcluster.ToolBin("tofu")
	if err != nil {
		b.Fatal(err)
	}
	tofu := filepath.Join(dir, "tofu")
	return func(args ...string) time.Duration {
		cmd := exec.Command(tofu, append([]string{"-chdir=" + work}, args...)...)
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil {
			b.Fatalf("tofu %s: %v\n%s", args[0], err, tail(out))
		}
		return took
	}
}

func tail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
