package sandboxclient_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestNotYours: Bob gets a clear refusal, naming him, the sandbox and its
// owner, for everything he tries on Alice's sandbox, and nothing reaches it.
func TestNotYours(t *testing.T) {
	t.Parallel()
	users := newUsers(t, "alice", "bob")
	alice, bob := users[0], users[1]
	tpl, _ := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	if sbx.Spec.Owner != alice.name {
		t.Fatalf("owner %q, want %q", sbx.Spec.Owner, alice.name)
	}
	ctx := context.Background()

	check := func(what string, err error) {
		t.Helper()
		var fe *sandboxclient.ForbiddenError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a ForbiddenError", what, err)
			return
		}
		msg := err.Error()
		for _, part := range []string{bob.name, sbx.Name, alice.name, "not its owner"} {
			if !strings.Contains(msg, part) {
				t.Errorf("%s: %q does not say %q", what, msg, part)
			}
		}
	}
	_, err := bob.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"true"}})
	check("exec", err)
	_, err = bob.client.ReadFile(ctx, sbx.Name, "x", io.Discard, sandboxclient.FileOptions{})
	check("read file", err)
	check("write file", bob.client.WriteFile(ctx, sbx.Name, "x", strings.NewReader("x"), 1, sandboxclient.FileOptions{}))
	check("port-forward", bob.client.PortForward(ctx, sbx.Name, sandboxclient.PortForwardOptions{Ports: []string{"0:7"}}))
	check("logs", bob.client.Logs(ctx, sbx.Name, io.Discard, sandboxclient.LogOptions{}))
	check("stop", bob.client.Stop(ctx, sbx.Name))
	check("delete", bob.client.Delete(ctx, sbx.Name))
	if _, err := alice.client.Get(ctx, sbx.Name); err != nil {
		t.Errorf("alice's sandbox after bob's attempts: %v", err)
	}

	_, err = alice.client.Exec(ctx, "no-such-sandbox", sandboxclient.ExecOptions{Command: []string{"true"}})
	var nf *sandboxclient.NotFoundError
	if !errors.As(err, &nf) || err.Error() != "sandbox no-such-sandbox not found" {
		t.Errorf("exec in a missing sandbox: %v", err)
	}
	mine, err := alice.client.List(ctx, sandboxclient.ListOptions{Mine: true})
	if err != nil || len(mine) != 1 || mine[0].Name != sbx.Name {
		t.Errorf("alice's own sandboxes: %v %v", mine, err)
	}
}

// TestStopStartAndLogs stops a sandbox (exec then says it is stopped),
// starts it again and reads its log.
func TestStopStartAndLogs(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, _ := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx := context.Background()

	var log strings.Builder
	if err := alice.client.Logs(ctx, sbx.Name, &log, sandboxclient.LogOptions{}); err != nil || !strings.Contains(log.String(), "hello from the sandbox pod") {
		t.Errorf("logs: %q %v", log.String(), err)
	}
	if err := alice.client.Stop(ctx, sbx.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.client.WaitStopped(ctx, sbx.Name, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	_, err := alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"true"}})
	var nr *sandboxclient.NotReadyError
	if !errors.As(err, &nr) || !strings.Contains(err.Error(), "phase Stopped") {
		t.Errorf("exec in a stopped sandbox: %v", err)
	}
	if _, err := alice.client.WaitReady(ctx, sbx.Name, time.Minute, nil); !errors.As(err, &nr) {
		t.Errorf("waiting for a stopped sandbox to be ready: %v", err)
	}
	if err := alice.client.Start(ctx, sbx.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.client.WaitReady(ctx, sbx.Name, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if code, err := alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"true"}}); err != nil || code != 0 {
		t.Errorf("exec after start: %d %v", code, err)
	}
}
