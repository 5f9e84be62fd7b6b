package realnode_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// wakeIdleTimeout is the idle timeout of BenchmarkWake's template: short,
// so each round finds the sandbox stopped again soon.
const wakeIdleTimeout = 5 * time.Second

// BenchmarkWake times what a client waits when it uses a sandbox that
// stopped for idleness: from the command (`true`) through the SDK to its
// exit status, the sandbox woken, its pod started again on the same
// workspace and a new session opened on the way. Each round waits,
// untimed, for the sandbox to stop again.
func BenchmarkWake(b *testing.B) {
	for _, handler := range handlers {
		b.Run(handler, func(b *testing.B) {
			e := requireNode(b)
			tpl := e.template(b, e.nodePool(b, handler), func(spec *v1.SandboxTemplateSpec) {
				spec.Lifecycle = &v1.Lifecycle{IdleTimeout: &metav1.Duration{Duration: wakeIdleTimeout}}
			})
			sbx, err := e.sdk.Claim(context.Background(), sandboxclient.ClaimOptions{Template: tpl.Name, Wait: waitReady})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { e.deleteAndWait(b, sbx.Name) })
			latency.Run(b, 1, func() time.Duration {
				e.waitIdleStopped(b, sbx.Name)
				start := time.Now()
				if _, code, stderr := e.exec(b, sbx.Name, "true"); code != 0 {
					b.Fatalf("true in %s: exit %d: %s", sbx.Name, code, stderr)
				}
				return time.Since(start)
			})
		})
	}
}

// waitIdleStopped waits until the sandbox stopped for idleness and its pod
// is gone.
func (e env) waitIdleStopped(b testing.TB, name string) {
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitReady, true, func(ctx context.Context) (bool, error) {
		sbx, err := e.sdk.Get(ctx, name)
		if err != nil {
			return false, err
		}
		return sbx.IdleStopped() && sbx.Status.Phase == v1.SandboxPhaseStopped, nil
	})
	if err != nil {
		b.Fatalf("sandbox %s did not stop for idleness: %v", name, err)
	}
}
