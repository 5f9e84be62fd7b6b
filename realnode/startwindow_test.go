package realnode_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// startProbe is the template's command: from its first instruction it
// tries, for a second, every target the policy denies, as code planted in
// the workspace and run at start would; it appends what it reached to
// /workspace/starts.jsonl, one line a start, then serves as the other
// templates do.
const startProbe = `
import json, os, socket, sys, time
reached, deadline = set(), time.monotonic() + 1
while time.monotonic() < deadline:
    for target in sys.argv[1:]:
        host, port = target.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=0.1).close()
            reached.add(target)
        except OSError:
            pass
with open("/workspace/starts.jsonl", "a") as f:
    f.write(json.dumps(sorted(reached)) + "\n")
os.execvp("python3", ["python3", "-m", "http.server", "8080", "--bind", "0.0.0.0"])
`

// checkStartWindow: no start of a sandbox's own code, cold, warm or after
// stop and start, reaches what its egress policy denies, however early it
// tries: the pod's egress gate holds it back until the policy is enforced.
func (e env) checkStartWindow(t *testing.T, pool *v1.NodePool, to targets) {
	ctx := context.Background()
	denied := []string{realnode.NodeIP + ":10250", hostOf(to.server) + ":8080", to.metadata, to.nodePort}
	tpl := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		s.Command = append([]string{"python3", "-c", startProbe}, denied...)
	})
	cold := e.sandboxes(t, tpl)[0]
	warmPool := e.warmPool(t, tpl.Name, 1)
	warm, err := e.sdk.Claim(ctx, sandboxclient.ClaimOptions{Pool: warmPool.Name, Wait: waitReady})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, warm.Name) })
	if err := e.sdk.Stop(ctx, cold.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sdk.WaitStopped(ctx, cold.Name, waitReady, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.sdk.Start(ctx, cold.Name); err != nil {
		t.Fatal(err)
	}
	e.waitReady(t, cold.Name)

	e.logGate(t, cold.Name)
	e.logGate(t, warm.Name)
	for name, want := range map[string]int{cold.Name: 2, warm.Name: 1} {
		// The probe logs a start a second after it began.
		var log bytes.Buffer
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			log.Reset()
			_, err := e.sdk.ReadFile(ctx, name, "starts.jsonl", &log, sandboxclient.FileOptions{})
			return err == nil && bytes.Count(log.Bytes(), []byte("\n")) >= want, nil
		})
		if err != nil {
			t.Errorf("sandbox %s logged %q; want %d starts", name, log.String(), want)
			continue
		}
		starts := 0
		for scanner := bufio.NewScanner(&log); scanner.Scan(); starts++ {
			var reached []string
			if err := json.Unmarshal(scanner.Bytes(), &reached); err != nil {
				t.Fatalf("sandbox %s logged %q", name, scanner.Text())
			}
			if len(reached) > 0 {
				t.Errorf("start %d of sandbox %s reached %v, which its policy denies, in its first second", starts+1, name, reached)
			}
		}
		if starts != want {
			t.Errorf("sandbox %s logged %d starts, want %d", name, starts, want)
		}
	}
}

// logGate logs what the egress gate of the sandbox's pod said: how long
// the policy took to be enforced, the time the gate adds to a start.
func (e env) logGate(t *testing.T, name string) {
	sbx := &v1.Sandbox{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: name}, sbx); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(e.cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	out, err := kube.CoreV1().Pods(sbx.Status.Namespace).GetLogs(environment.PodName, &corev1.PodLogOptions{Container: environment.GateName}).DoRaw(context.Background())
	if err != nil {
		t.Errorf("the egress gate of sandbox %s: %v", name, err)
		return
	}
	t.Logf("sandbox %s (%s): %s", name, sbx.Status.LaunchType, bytes.TrimSpace(out))
}
