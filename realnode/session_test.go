package realnode_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

// listeningProgram prints the TCP ports something in the sandbox listens
// on, from the kernel's tables (gVisor's own under runsc).
const listeningProgram = `
ports = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        fields = line.split()
        if fields[3] == "0A":
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
print(" ".join(str(p) for p in sorted(ports)))
`

// checkSessions drives the sandbox agent through the SDK's session, as
// the CLI, MCP and SSH do: commands, the process group on a timeout,
// background processes and terminals that outlive the client, file
// watches, a dial inside (port-forwarding that works under gVisor), and
// who may open one.
func (e env) checkSessions(t *testing.T, sbx started, handler string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := e.sdk.Session(ctx, sbx.Name)
	if err != nil {
		t.Fatalf("no session with sandbox %s: %v (its container mounts %+v)", sbx.Name, err, sbx.pod.Spec.Containers[0].VolumeMounts)
	}

	t.Run("a mebibyte both ways, exit codes, output order", func(t *testing.T) {
		in := make([]byte, 1<<20)
		_, _ = rand.Read(in)
		var out bytes.Buffer
		code, err := e.sdk.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: &out})
		if err != nil || code != 0 || !bytes.Equal(out.Bytes(), in) {
			t.Errorf("cat of 1 MiB: code %d, %v, %d bytes back, equal %v", code, err, out.Len(), bytes.Equal(out.Bytes(), in))
		}
		var both bytes.Buffer
		code, err = e.sdk.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{
			Command: []string{"sh", "-c", "for i in 1 2 3; do echo o$i; sleep 0.1; echo e$i >&2; sleep 0.1; done; exit 7"},
			Stdout:  &both, Stderr: &both,
		})
		if err != nil || code != 7 || strings.Join(strings.Fields(both.String()), " ") != "o1 e1 o2 e2 o3 e3" {
			t.Errorf("interleaved: code %d, %v, %q", code, err, both.String())
		}
	})

	t.Run("a timeout kills the process group", func(t *testing.T) {
		marker := "sleep 3131"
		code, err := e.sdk.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{
			Command: []string{"sh", "-c", marker + " & " + marker + " & wait"}, Timeout: 2 * time.Second,
		})
		if err == nil {
			t.Fatalf("a command past its timeout ended with code %d and no error", code)
		}
		time.Sleep(500 * time.Millisecond)
		inside := e.python(t, sbx.Name, `
import os
left = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try: cmd = open("/proc/%s/cmdline" % p).read().replace("\0", " ")
        except OSError: continue
        if "3131" in cmd and "python" not in cmd: left.append(cmd)
print(len(left))
`)
		if strings.TrimSpace(inside) != "0" {
			t.Errorf("%s processes left in the sandbox after the timeout", strings.TrimSpace(inside))
		}
		if handler == realnode.RuncHandler {
			// runc's processes are the node's too.
			if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("the node still runs %q: pids %s", marker, out)
			}
		}
	})

	t.Run("background processes and terminals outlive the client", func(t *testing.T) {
		if _, err := s.Start(ctx, session.StartOptions{Name: "job", Command: []string{"sh", "-c", "echo started; sleep 1; echo later"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Start(ctx, session.StartOptions{Name: "term", Command: []string{"sh"}, TTY: true, Size: &wire.Size{Cols: 90, Rows: 20}}); err != nil {
			t.Fatal(err)
		}
		seen := make(chan struct{})
		attachCtx, detach := context.WithCancel(ctx)
		in, typed := io.Pipe()
		go func() {
			_, _ = s.Attach(attachCtx, "term", session.AttachOptions{Stdin: in, Stdout: closeOn("size-20x90", seen)})
		}()
		_, _ = io.WriteString(typed, "echo size-$(stty size | tr ' ' x)\n")
		select {
		case <-seen:
		case <-time.After(time.Minute):
			t.Fatal("the terminal never answered")
		}
		detach()
		// The client dies: its exec stream with it.
		e.sdk.CloseSessions()
		<-s.Done()
		again, err := e.sdk.Session(ctx, sbx.Name)
		if err != nil {
			t.Fatal(err)
		}
		job, err := again.Wait(ctx, "job")
		if err != nil || job.Exited == nil || job.Exited.Code != 0 {
			t.Fatalf("job after the client left: %+v, %v", job, err)
		}
		out, _, _, err := again.Output(ctx, "job", 0)
		if err != nil || string(out) != "started\nlater\n" {
			t.Errorf("the job's output after reconnecting: %q, %v", out, err)
		}
		screen, _, _, err := again.Output(ctx, "term", -1)
		if err != nil || !strings.Contains(string(screen), "size-20x90") {
			t.Errorf("the terminal's scrollback after reconnecting: %q, %v", screen, err)
		}
		resized := make(chan struct{})
		sizes := make(chan wire.Size, 1)
		sizes <- wire.Size{Cols: 120, Rows: 40}
		attachCtx, detach = context.WithCancel(ctx)
		defer detach()
		in, typed = io.Pipe()
		go func() {
			_, _ = again.Attach(attachCtx, "term", session.AttachOptions{Offset: -1, Stdin: in, Stdout: closeOn("size-40x120", resized), Resize: sizes})
		}()
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(typed, "echo size-$(stty size | tr ' ' x)\n")
		select {
		case <-resized:
		case <-time.After(time.Minute):
			t.Error("the reattached terminal did not follow the resize")
		}
		detach()
		if err := again.Signal(ctx, "term", "KILL"); err != nil {
			t.Error(err)
		}
	})

	t.Run("a watch sees nested changes", func(t *testing.T) {
		s, err := e.sdk.Session(ctx, sbx.Name)
		if err != nil {
			t.Fatal(err)
		}
		watchCtx, stop := context.WithCancel(ctx)
		defer stop()
		events := make(chan wire.Event, 64)
		go func() { _ = s.Watch(watchCtx, s.Workspace, func(ev wire.Event) bool { events <- ev; return true }) }()
		time.Sleep(500 * time.Millisecond)
		e.python(t, sbx.Name, `
import os, time
os.makedirs("/workspace/w/deep", exist_ok=True)
time.sleep(0.5)
open("/workspace/w/deep/f", "w").write("1")
time.sleep(0.2)
open("/workspace/w/deep/f", "a").write("2")
time.sleep(0.2)
os.remove("/workspace/w/deep/f")
`)
		want := map[string]bool{"create /workspace/w/deep/f": false, "write /workspace/w/deep/f": false, "remove /workspace/w/deep/f": false}
		deadline := time.After(30 * time.Second)
		for missing := len(want); missing > 0; {
			select {
			case ev := <-events:
				if seen, ok := want[ev.Op+" "+ev.Path]; ok && !seen {
					want[ev.Op+" "+ev.Path] = true
					missing--
				}
			case <-deadline:
				t.Fatalf("events seen: %v", want)
			}
		}
	})

	t.Run("a dial reaches the sandbox's port", func(t *testing.T) {
		s, err := e.sdk.Session(ctx, sbx.Name)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := s.Dial(ctx, 8080)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "GET / HTTP/1.0\r\nHost: sandbox\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("GET / through a dial: %v, %v", resp, err)
		}
	})

	t.Run("no listening socket of the agent's", func(t *testing.T) {
		if got := strings.TrimSpace(e.python(t, sbx.Name, listeningProgram)); got != "8080" {
			t.Errorf("TCP ports listening in the sandbox: %q, want only the template's 8080", got)
		}
	})

	t.Run("the page's terminal resumes after a reload", func(t *testing.T) { e.checkPageTerminal(t, sbx) })
	t.Run("a directory copies both ways", func(t *testing.T) { e.checkCopyDir(t, sbx) })

	t.Run("only the owner opens one", func(t *testing.T) {
		bob, err := sandboxclient.New(e.cluster.Developers(t, "bob")[0].Config)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bob.Session(ctx, sbx.Name); err == nil {
			t.Error("another developer opened a session with alice's sandbox")
		}
	})
}

// closeOn closes ch once what is written contains word.
func closeOn(word string, ch chan struct{}) io.Writer {
	var seen bytes.Buffer
	done := false
	return writerFunc(func(p []byte) (int, error) {
		seen.Write(p)
		if !done && strings.Contains(seen.String(), word) {
			done = true
			close(ch)
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
