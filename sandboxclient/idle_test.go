package sandboxclient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestIdleStopAndWake: a command keeps a sandbox with an idle timeout
// running for as long as it runs, though that is longer than the timeout;
// unused, the sandbox stops; reading its logs does not wake it; the next
// command does, telling Waking, and runs.
func TestIdleStopAndWake(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	ctx := context.Background()
	// Long enough that a use recorded late on a busy CI machine (the
	// command's reports come every quarter of it) still lands before the
	// idle stop.
	const idleTimeout = 6 * time.Second
	tpl, _ := testcluster.Get(t).IdleTemplate(t, idleTimeout)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	current := func() *v1.Sandbox {
		t.Helper()
		got, err := alice.client.Get(ctx, sbx.Name)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	testcluster.Eventually(t, "the idle timeout in the status", func() (bool, string) {
		got := current()
		return got.Status.Idle != nil && got.Status.Idle.StopAt != nil, "no status.idle yet"
	})

	command := []string{"sleep", strconv.Itoa(int((idleTimeout + 3*time.Second).Seconds()))}
	code, err := alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: command})
	if err != nil || code != 0 {
		t.Fatalf("%s: %d %v", strings.Join(command, " "), code, err)
	}
	if got := current(); got.IdleStopped() || got.Status.Phase != v1.SandboxPhaseRunning {
		t.Fatalf("a sandbox running %q stopped after its %s idle timeout: phase %s", strings.Join(command, " "), idleTimeout, got.Status.Phase)
	}

	testcluster.Eventually(t, "the unused sandbox stopped", func() (bool, string) {
		got := current()
		return got.IdleStopped() && got.Status.Phase == v1.SandboxPhaseStopped, "phase " + string(got.Status.Phase)
	})
	// Reading the logs does not wake it: they went with its pod.
	var notReady *sandboxclient.NotReadyError
	if err := alice.client.Logs(ctx, sbx.Name, io.Discard, sandboxclient.LogOptions{}); !errors.As(err, &notReady) {
		t.Errorf("logs of an idle-stopped sandbox: %v; want a NotReadyError", err)
	}
	if got := current(); !got.IdleStopped() {
		t.Errorf("reading the logs woke the sandbox: phase %s", got.Status.Phase)
	}
	var mu sync.Mutex
	var told []sandboxclient.Progress
	alice.client.Waking = func(p sandboxclient.Progress) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, p)
	}
	var out bytes.Buffer
	code, err = alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"echo", "awake"}, Stdout: &out})
	if err != nil || code != 0 || strings.TrimSpace(out.String()) != "awake" {
		t.Fatalf("exec in an idle-stopped sandbox: %d %v %q; want it woken and the command run", code, err, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) < 2 || !strings.Contains(told[0].Message, "waking") || told[len(told)-1].Phase != v1.SandboxPhaseRunning {
		t.Errorf("the wake's progress: %+v; want a first word of waking and the sandbox Running at the end", told)
	}
}

// TestEachUseIsRecorded: each kind of operation records a use of a sandbox
// with an idle timeout (file operations, logs, commands), a forwarded
// connection keeps recording for as long as it is open, and a sandbox
// without an idle timeout gets no record at all.
func TestEachUseIsRecorded(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	ctx := context.Background()
	// Long enough that a use recorded late, on a CI machine busy with
	// every other package's tests, still lands before the idle stop: each
	// use comes a report interval (a quarter of the timeout) after the one
	// before was recorded.
	const idleTimeout = 8 * time.Second
	report := idleTimeout / 4
	tpl, _ := testcluster.Get(t).IdleTemplate(t, idleTimeout)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	recorded := func() time.Time {
		t.Helper()
		got, err := alice.client.Get(ctx, sbx.Name)
		if err != nil {
			t.Fatal(err)
		}
		at, _ := time.Parse(time.RFC3339Nano, got.Annotations[v1.AnnotationLastActivity])
		return at
	}
	testcluster.Eventually(t, "the idle timeout in the status", func() (bool, string) {
		got, err := alice.client.Get(ctx, sbx.Name)
		return err == nil && got.Status.Idle != nil, "no status.idle yet"
	})
	uses := []struct {
		name string
		use  func() error
	}{
		{"write a file", func() error {
			return alice.client.WriteFile(ctx, sbx.Name, "used.txt", strings.NewReader("x"), 1, sandboxclient.FileOptions{})
		}},
		{"read a file", func() error {
			_, err := alice.client.ReadFile(ctx, sbx.Name, "used.txt", io.Discard, sandboxclient.FileOptions{})
			return err
		}},
		{"list a directory", func() error { _, err := alice.client.ListDir(ctx, sbx.Name, "."); return err }},
		{"stat", func() error { _, err := alice.client.Stat(ctx, sbx.Name, "used.txt"); return err }},
		{"logs", func() error { return alice.client.Logs(ctx, sbx.Name, io.Discard, sandboxclient.LogOptions{}) }},
		{"a command", func() error {
			_, err := alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"true"}})
			return err
		}},
	}
	for _, u := range uses {
		before := recorded()
		time.Sleep(report + 100*time.Millisecond)
		if err := u.use(); err != nil {
			t.Fatalf("%s: %v", u.name, err)
		}
		testcluster.Eventually(t, u.name+" recorded as a use", func() (bool, string) {
			at := recorded()
			return at.After(before), "last activity still " + at.String()
		})
	}

	conn, err := alice.client.DialPort(ctx, sbx.Name, 7)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(report + 200*time.Millisecond)
	during := recorded()
	time.Sleep(2 * report)
	if later := recorded(); !later.After(during) {
		t.Errorf("an open forwarded connection: last activity %s, and %s %s later; want it recorded while open", during, later, 2*report)
	}
	_ = conn.Close()

	plain, _ := newTemplate(t)
	other := claim(t, alice, sandboxclient.ClaimOptions{Template: plain.Name})
	if _, err := alice.client.Exec(ctx, other.Name, sandboxclient.ExecOptions{Command: []string{"sleep", "2"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	got, err := alice.client.Get(ctx, other.Name)
	if err != nil {
		t.Fatal(err)
	}
	if at := got.Annotations[v1.AnnotationLastActivity]; at != "" {
		t.Errorf("a sandbox without an idle timeout got an activity record %q; want no write at all", at)
	}
}
