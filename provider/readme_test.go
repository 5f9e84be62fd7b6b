package provider_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestREADMEInstallRecipe runs the README's installation block as written,
// in a home directory of its own, with OpenTofu and with Terraform (the
// block's init line says either), and then validates a configuration that
// names the provider by its short source: `init` must install it from the
// mirror without asking a registry.
func TestREADMEInstallRecipe(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- TestREADMEInstallRecipe[^>]*-->\n```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no installation block marked for TestREADMEInstallRecipe")
	}
	lines := strings.Split(strings.TrimSpace(string(m[1])), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "tofu init") || !strings.Contains(lines[2], "terraform init") {
		t.Fatalf("the installation block is no longer install, export, tofu init (or terraform init): %q", lines)
	}
	for _, tool := range []struct{ name, bin, init string }{
		{"OpenTofu", "tofu", lines[2]},
		{"Terraform", "terraform", "terraform init"},
	} {
		t.Run(tool.name, func(t *testing.T) {
			dir, err := testcluster.ToolBin(tool.bin)
			if err != nil {
				t.Fatal(err)
			}
			runInstallRecipe(t, root, dir, lines[0], lines[1], tool.init, tool.bin+" validate -no-color")
		})
	}
}

// runInstallRecipe runs install and export in the repository, then init and
// validate in a configuration's directory, with toolDir on the PATH.
func runInstallRecipe(t *testing.T, root, toolDir, install, export, init, validate string) {
	t.Helper()
	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(`
terraform {
  required_providers {
    agentsandbox = { source = "agentsandbox/agentsandbox", version = "~> 0.1" }
  }
}
`+unreachable+`
resource "agentsandbox_template" "python" {
  name = "python"
  spec = { image = "python:3.12" }
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{"set -euo pipefail", "cd " + root, install, export, "cd " + config, init, validate}, "\n")
	cmd := exec.Command("bash", "-c", script)
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HOME="+home, "AGENTSANDBOX_CACHE=", "XDG_CACHE_HOME=", "TF_CLI_CONFIG_FILE=",
		"PATH="+toolDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		// Go's caches stay where they are: only the recipe's own files
		// go to the new home.
		"GOCACHE="+goEnv(t, "GOCACHE"), "GOMODCACHE="+goEnv(t, "GOMODCACHE"), "GOPATH="+goEnv(t, "GOPATH"),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's installation block failed: %v\n%s", err, out)
	}
	for _, want := range []string{"Installing agentsandbox/agentsandbox v0.1.0", "The configuration is valid"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "agentsandbox", "providers", "cli.tfrc")); err != nil {
		t.Errorf("the CLI configuration is not where the README says: %v", err)
	}
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
