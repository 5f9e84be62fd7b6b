//go:build linux

package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestIdleStopAndWakeOnConnect: a sandbox nobody uses stops for idleness,
// and the next command through the CLI wakes it (with progress on stderr)
// and runs; a reconciler killed while the sandbox is stopped leaves it
// stopped and wakeable; with wakeOnConnect false, a command fails saying
// so and `start` brings the sandbox back. (MCP and SSH wake it too:
// mcpserver's and sshproxy's tests.)
func TestIdleStopAndWakeOnConnect(t *testing.T) {
	cluster := testcluster.Get(t)
	rec := startReconciler(t, cluster)
	admin := cluster.Client
	ctx := context.Background()
	tpl, _ := cluster.IdleTemplate(t, 3*time.Second)
	alice := cluster.Developers(t, "alice")[0]
	sbx := claim(t, alice, tpl.Name)

	cluster.WaitIdleStopped(t, sbx.Name)
	if res := cli(t, alice, "", "list"); res.code != 0 || !strings.Contains(res.stdout, "IDLE") || !strings.Contains(res.stdout, "stopped after 3s unused") {
		t.Errorf("list of an idle-stopped sandbox: %+v", res)
	}
	res := cli(t, alice, "", "exec", sbx.Name, "--", "echo", "woken")
	if res.code != 0 || res.stdout != "woken\n" || !strings.Contains(res.stderr, "waking the sandbox") || !strings.Contains(res.stderr, "Running") {
		t.Errorf("exec in an idle-stopped sandbox: %+v; want it woken, with progress on stderr, and the command run", res)
	}

	cluster.WaitIdleStopped(t, sbx.Name)
	// The reconciler killed and started again: the sandbox stays stopped
	// (it is in the status, not the process) and wakes.
	if err := rec.proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = rec.proc.Wait()
	rec.start()
	time.Sleep(2 * time.Second)
	got := &v1.Sandbox{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(&sbx), got); err != nil || !got.IdleStopped() || got.Status.Phase != v1.SandboxPhaseStopped {
		t.Fatalf("after the reconciler's restart, an idle-stopped sandbox is in phase %s (idle-stopped %v, %v)", got.Status.Phase, got.IdleStopped(), err)
	}
	if res := cli(t, alice, "", "exec", sbx.Name, "--", "echo", "after the restart"); res.code != 0 || res.stdout != "after the restart\n" {
		t.Errorf("exec in an idle-stopped sandbox after the reconciler's restart: %+v", res)
	}

	// wakeOnConnect false: using it does not start it; start does.
	patch := client.MergeFrom(tpl.DeepCopy())
	tpl.Spec.Lifecycle.WakeOnConnect = ptr.To(false)
	if err := admin.Patch(ctx, tpl, patch); err != nil {
		t.Fatal(err)
	}
	cluster.WaitIdleStopped(t, sbx.Name)
	testcluster.Eventually(t, "status.idle.wakeOnConnect false", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(&sbx), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Idle != nil && !got.Status.Idle.WakeOnConnect, "not yet"
	})
	res = cli(t, alice, "", "exec", sbx.Name, "--", "true")
	if res.code == 0 || !strings.Contains(res.stderr, "wakeOnConnect is false") {
		t.Errorf("exec in an idle-stopped sandbox that may not be woken: %+v", res)
	}
	if res := cli(t, alice, "", "start", sbx.Name, "--wait"); res.code != 0 {
		t.Fatalf("start: %+v", res)
	}
	if res := cli(t, alice, "", "exec", sbx.Name, "--", "echo", "started"); res.code != 0 || res.stdout != "started\n" {
		t.Errorf("exec after start: %+v", res)
	}
}
