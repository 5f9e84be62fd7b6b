package sandboxclient_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestExec runs commands through the API server and the node: separate
// stdout and stderr, the exit code, stdin, a timeout and a terminal.
func TestExec(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, _ := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx := context.Background()

	var stdout, stderr bytes.Buffer
	code, err := alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{
		Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil || code != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("exit 3: code %d, err %v, stdout %q, stderr %q", code, err, stdout.String(), stderr.String())
	}

	stdout.Reset()
	code, err = alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"true"}, Stdout: &stdout})
	if err != nil || code != 0 {
		t.Errorf("true: code %d, err %v", code, err)
	}

	// kwok never passes on the end of stdin, so the command reads a line
	// rather than to the end.
	stdout.Reset()
	code, err = alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{
		Command: []string{"sh", "-c", `read line; echo "got $line"`},
		Stdin:   strings.NewReader("hello sandbox\n"), Stdout: &stdout,
	})
	if err != nil || code != 0 || stdout.String() != "got hello sandbox\n" {
		t.Errorf("stdin: code %d, err %v, stdout %q", code, err, stdout.String())
	}

	start := time.Now()
	_, err = alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"sleep", "30"}, Timeout: 500 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("timeout: err %v after %s", err, time.Since(start))
	}

	// With a terminal, stdin is given too: kwok v0.8's node server crashes
	// on a terminal without stdin. Each command lingers a second after its
	// output because kwok closes the terminal as soon as the command exits,
	// dropping output it has not copied yet.
	stdout.Reset()
	code, err = alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{
		Command: []string{"sh", "-c", "test -t 0 && test -t 1 && echo terminal; sleep 1"}, TTY: true,
		Stdin: strings.NewReader(""), Stdout: &stdout,
	})
	if err != nil || code != 0 || !strings.Contains(stdout.String(), "terminal") {
		t.Errorf("tty: code %d, err %v, stdout %q", code, err, stdout.String())
	}

	// A resize reaches the command's terminal (it waits up to 10s for it).
	stdout.Reset()
	code, err = alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{
		Command: []string{"sh", "-c", `i=0; while [ "$(stty size)" = "0 0" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; stty size; sleep 1`},
		TTY:     true, Stdin: strings.NewReader(""), Stdout: &stdout, Resize: &sizes{{Width: 123, Height: 45}},
	})
	if err != nil || code != 0 || strings.TrimSpace(stdout.String()) != "45 123" {
		t.Errorf("tty resize: code %d, err %v, stdout %q", code, err, stdout.String())
	}
}

// sizes is a TerminalSizeQueue that hands out its sizes and then ends.
type sizes []remotecommand.TerminalSize

func (s *sizes) Next() *remotecommand.TerminalSize {
	if len(*s) == 0 {
		return nil
	}
	next := (*s)[0]
	*s = (*s)[1:]
	return &next
}
