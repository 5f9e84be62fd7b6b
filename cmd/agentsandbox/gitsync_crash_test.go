package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestSyncKilledHalfWayLeavesNothingUnpruned kills the reconciler with
// SIGKILL while a sync creates 300 templates, once some exist and before
// the sync ends, then pushes a revision without them: the next sync must
// prune every one, however many the killed sync created.
func TestSyncKilledHalfWayLeavesNothingUnpruned(t *testing.T) {
	const n = 300
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	run := testcluster.Name("crash")
	label := client.MatchingLabels{testcluster.RunLabel: run}
	srv := gittest.New(t, "", "")
	srv.Commit("main", testcluster.TemplateFiles(map[string]string{}, "templates", n, run))
	t.Cleanup(func() { _ = c.DeleteAllOf(ctx, &v1.SandboxTemplate{}, label) })
	gs := newGitSync(t, srv.URL())

	proc := startReconciler(t, cluster)
	waitSyncUnderway(t, c, label)
	if err := proc.proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.proc.Wait()
	list := &v1.SandboxTemplateList{}
	if err := c.List(ctx, list, label); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == n {
		t.Fatalf("the sync created all %d templates before the kill: the test proves nothing", n)
	}
	t.Logf("killed the reconciler with %d of %d templates created", len(list.Items), n)

	keep := run + "-keep"
	srv.Commit("main", map[string]string{"keep.yaml": testcluster.TemplateYAML(keep, run)})
	proc.start()
	if out, code := runCLI(t, "sync", "--gitsync", gs.Name, "--timeout", "3m"); code != 0 {
		t.Fatalf("sync after the restart: exit %d, output:\n%s", code, out)
	}
	if err := c.List(ctx, list, label); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, tpl := range list.Items {
		if tpl.Name != keep {
			left = append(left, tpl.Name)
		}
	}
	if len(left) > 0 {
		t.Errorf("%d templates of the killed sync were not pruned: %s", len(left), strings.Join(left[:min(5, len(left))], ", "))
	}
}

// waitSyncUnderway waits until a sync has created a first template of
// those label selects.
func waitSyncUnderway(t *testing.T, c client.Client, label client.MatchingLabels) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sync created no template in 2 minutes")
		}
		list := &v1.SandboxTemplateList{}
		if err := c.List(context.Background(), list, label); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			return
		}
	}
}
