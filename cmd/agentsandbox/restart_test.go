package main

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
)

// TestReconcilerSurvivesSIGKILL runs the real binary, kills it with SIGKILL
// at random moments while it builds a batch of sandboxes, restarts it, and
// checks that every sandbox converges with exactly one of each object and
// nothing left after deletion.
func TestReconcilerSurvivesSIGKILL(t *testing.T) {
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "agentsandbox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "reconcile", "--kubeconfig", cluster.Kubeconfig,
			"--leader-elect=false", "--metrics-addr=0", "--health-addr=0")
		cmd.Stdout, cmd.Stderr = nil, nil
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("restart")},
		Spec:       v1.SandboxTemplateSpec{Image: "python:3.12", Workspace: v1.Workspace{Persistent: true}},
	}
	if err := c.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, tpl) })

	proc := start()
	var sandboxes []*v1.Sandbox
	for i := 0; i < 8; i++ {
		s := &v1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("restart")},
			Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}, Owner: "alice@example.com"},
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		sandboxes = append(sandboxes, s)
	}
	for kill := 0; kill < 3; kill++ {
		time.Sleep(time.Duration(50+rand.IntN(400)) * time.Millisecond)
		if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = proc.Wait()
		proc = start()
	}
	t.Cleanup(func() {
		_ = proc.Process.Signal(os.Interrupt)
		_ = proc.Wait()
	})

	for _, s := range sandboxes {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return false, err
			}
			return conditions.IsTrue(s, v1.ReadyCondition), nil
		})
		if err != nil {
			t.Fatalf("sandbox %s not Ready after the restarts: %s", s.Name, conditions.GetMessage(s, v1.ReadyCondition))
		}
		ns := client.InNamespace("sandbox-" + s.Name)
		for _, list := range []client.ObjectList{&corev1.PodList{}, &networkingv1.NetworkPolicyList{}, &corev1.PersistentVolumeClaimList{}, &corev1.ResourceQuotaList{}} {
			if err := c.List(ctx, list, ns); err != nil {
				t.Fatal(err)
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(items); n != 1 {
				t.Errorf("sandbox %s: %d objects in %T, want exactly 1", s.Name, n, list)
			}
		}
	}

	for _, s := range sandboxes {
		if err := c.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, s := range sandboxes {
			err := c.Get(ctx, client.ObjectKey{Name: "sandbox-" + s.Name}, &corev1.Namespace{})
			if err == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("namespaces left behind after deleting the sandboxes: %v", err)
	}
}
