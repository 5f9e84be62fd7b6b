package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
)

// runCLI runs the command against the test cluster and returns its output
// and exit code.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	t.Setenv("KUBECONFIG", testcluster.Get(t).Kubeconfig)
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	var exit *exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String() + exit.Error(), exit.code
	default:
		return out.String() + err.Error(), 1
	}
}

func writeDecl(t *testing.T, dir, file, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDiffAndSyncOnce(t *testing.T) {
	dir := t.TempDir()
	pool := testcluster.Name("cli")
	c := testcluster.Get(t).Client
	t.Cleanup(func() { _ = c.Delete(context.Background(), &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}) })
	decl := "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: " + pool +
		"\nspec:\n  runtimeHandler: runsc\n  nodeSelector:\n    agentsandbox.dev/node-group: gvisor\n"
	writeDecl(t, dir, "pool.yaml", decl)

	out, code := runCLI(t, "diff", "--path", dir)
	if code != 1 || !strings.Contains(out, "+ NodePool/"+pool+" (pool.yaml, document 1): created") {
		t.Fatalf("diff before the first sync: exit %d, output:\n%s", code, out)
	}
	out, code = runCLI(t, "sync", "--once", "--path", dir)
	if code != 0 || !strings.Contains(out, pool+" created") {
		t.Fatalf("sync --once: exit %d, output:\n%s", code, out)
	}
	out, code = runCLI(t, "diff", "--path", dir)
	if code != 0 || !strings.Contains(out, "no changes") {
		t.Fatalf("diff after the sync: exit %d, output:\n%s", code, out)
	}

	writeDecl(t, dir, "pool.yaml", strings.Replace(decl, "node-group: gvisor", "node-group: general", 1))
	out, code = runCLI(t, "diff", "--path", dir)
	if code != 1 || !strings.Contains(out, `spec.nodeSelector.agentsandbox.dev/node-group: "gvisor" → "general"`) {
		t.Fatalf("diff of a change: exit %d, output:\n%s", code, out)
	}
	got := &v1.NodePool{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: pool}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeSelector["agentsandbox.dev/node-group"] != "gvisor" {
		t.Errorf("diff changed the cluster: %v", got.Spec.NodeSelector)
	}

	writeDecl(t, dir, "pool.yaml", decl+"  runtimeHandlr: x\n")
	out, code = runCLI(t, "diff", "--path", dir)
	if code != 2 || !strings.Contains(out, `pool.yaml, document 1: NodePool: line 9: unknown field "spec.runtimeHandlr"`) {
		t.Fatalf("diff of an invalid declaration: exit %d, output:\n%s", code, out)
	}
	if _, code = runCLI(t, "sync", "--path", dir); code != 1 {
		t.Errorf("sync without --once: exit %d", code)
	}

	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"deploy/pool.yaml": strings.Replace(decl, "node-group: gvisor", "node-group: general", 1)})
	out, code = runCLI(t, "diff", "--git", srv.URL(), "--branch", "main", "--path", "deploy")
	if code != 1 || !strings.Contains(out, `spec.nodeSelector.agentsandbox.dev/node-group: "gvisor" → "general"`) {
		t.Fatalf("diff --git: exit %d, output:\n%s", code, out)
	}
	if out, code = runCLI(t, "diff", "--git", srv.URL(), "--branch", "nope"); code != 2 || !strings.Contains(out, `branch "nope" not found`) {
		t.Fatalf("diff --git of a missing branch: exit %d, output:\n%s", code, out)
	}
}
