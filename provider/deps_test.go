package provider

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestPluginLinksNoControllers: the Terraform plugin needs the API types
// and a client, not the controllers nor their Git and server-side apply
// libraries, which would only make it bigger and slower to start.
func TestPluginLinksNoControllers(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps .: %v", err)
	}
	const module = "github.com/agentsandbox/terraform-provider-agentsandbox/"
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{module + "reconcile", module + "gitops", "github.com/fluxcd/", "github.com/go-git/"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("the provider plugin links %s", pkg)
			}
		}
	}
}
