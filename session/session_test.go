package session_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/session"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session/agent"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

// These tests run the agent in this process against real processes,
// terminals, files and inotify; realnode/ runs it in sandboxes on runc and
// gVisor, reached through exec.

// connPair is the two ends of a Unix socket pair.
func connPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

// serve is an agent with one connected session.
func serve(t *testing.T, a *agent.Agent) *session.Session {
	t.Helper()
	client, server := connPair(t)
	go func() { _ = a.ServeConn(server) }()
	s, err := session.Open(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRunStreamsOutputAndExit(t *testing.T) {
	s := serve(t, agent.New())
	var out, errOut bytes.Buffer
	exit, err := s.Run(ctx(t), session.RunOptions{
		Command: []string{"sh", "-c", `echo "out $GREETING"; echo err >&2; pwd; exit 3`},
		Env:     []string{"GREETING=hello"}, Dir: t.TempDir(), Stdout: &out, Stderr: &errOut,
	})
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 3 || exit.Signal != "" || exit.TimedOut {
		t.Errorf("exit = %+v, want code 3", exit)
	}
	if !strings.HasPrefix(out.String(), "out hello\n/") || errOut.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}

	exit, err = s.Run(ctx(t), session.RunOptions{Command: []string{"no-such-program-here"}, Stderr: &errOut})
	if err != nil || exit.Code != 127 {
		t.Errorf("a missing program: exit %+v, %v; want 127", exit, err)
	}
	exit, err = s.Run(ctx(t), session.RunOptions{Command: []string{"sh", "-c", "kill -KILL $$"}})
	if err != nil || exit.Code != 137 || exit.Signal != "KILL" {
		t.Errorf("killed by a signal: exit %+v, %v; want 137 KILL", exit, err)
	}
}

func TestRunCarriesABinaryMebibyteBothWays(t *testing.T) {
	s := serve(t, agent.New())
	in := make([]byte, 1<<20)
	_, _ = rand.Read(in)
	var out bytes.Buffer
	exit, err := s.Run(ctx(t), session.RunOptions{Command: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: &out})
	if err != nil || exit.Code != 0 {
		t.Fatalf("exit %+v, %v", exit, err)
	}
	if !bytes.Equal(out.Bytes(), in) {
		t.Errorf("got %d bytes back, not the %d sent", out.Len(), len(in))
	}
}

// orderWriter records which stream wrote what, in order.
type orderWriter struct {
	name string
	log  *[]string
}

func (w orderWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Fields(string(p)) {
		*w.log = append(*w.log, w.name+":"+line)
	}
	return len(p), nil
}

func TestRunKeepsTheOrderOfInterleavedOutput(t *testing.T) {
	s := serve(t, agent.New())
	var log []string
	_, err := s.Run(ctx(t), session.RunOptions{
		Command: []string{"sh", "-c", `for i in 1 2 3 4; do echo o$i; sleep 0.05; echo e$i >&2; sleep 0.05; done`},
		Stdout:  orderWriter{"out", &log}, Stderr: orderWriter{"err", &log},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "out:o1 err:e1 out:o2 err:e2 out:o3 err:e3 out:o4 err:e4"
	if got := strings.Join(log, " "); got != want {
		t.Errorf("order %q, want %q", got, want)
	}
}

// alive tells whether the process whose pid is in file still runs.
func alive(t *testing.T, file string) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// A killed process may stay a zombie where nothing reaps orphans.
	for range 50 {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func TestTimeoutAndCancelKillTheProcessGroup(t *testing.T) {
	s := serve(t, agent.New())
	dir := t.TempDir()
	script := func(pidFile string) []string {
		return []string{"sh", "-c", `sleep 300 & echo $! > ` + pidFile + `; echo started; wait`}
	}
	t.Run("timeout", func(t *testing.T) {
		pidFile := filepath.Join(dir, "timeout.pid")
		exit, err := s.Run(ctx(t), session.RunOptions{Command: script(pidFile), Timeout: 500 * time.Millisecond})
		if err != nil || !exit.TimedOut || exit.Code != 137 {
			t.Fatalf("exit %+v, %v; want timed out, 137", exit, err)
		}
		if alive(t, pidFile) {
			t.Error("the command's background child outlived the timeout")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		pidFile := filepath.Join(dir, "cancel.pid")
		c, cancel := context.WithCancel(ctx(t))
		started := make(chan struct{})
		go func() {
			_, _ = s.Run(c, session.RunOptions{Command: script(pidFile), Stdout: signalOn("started", started)})
		}()
		<-started
		cancel()
		time.Sleep(200 * time.Millisecond)
		if alive(t, pidFile) {
			t.Error("the command's background child outlived the cancelled run")
		}
	})
}

// signalOn closes ch when what is written contains word.
func signalOn(word string, ch chan struct{}) io.Writer {
	var buf bytes.Buffer
	closed := false
	return writerFunc(func(p []byte) (int, error) {
		buf.Write(p)
		if !closed && strings.Contains(buf.String(), word) {
			closed = true
			close(ch)
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestBackgroundProcessOutlivesItsSession(t *testing.T) {
	a := agent.New()
	first := serve(t, a)
	p, err := first.Start(ctx(t), session.StartOptions{Name: "job", Command: []string{"sh", "-c", "echo one; read line; echo got $line; exit 4"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "job" || p.PID == 0 {
		t.Errorf("started %+v", p)
	}
	if _, err := first.Start(ctx(t), session.StartOptions{Name: "job", Command: []string{"true"}}); err == nil {
		t.Error("a second process named job was started while the first runs")
	}
	_ = first.Close()

	second := serve(t, a)
	list, err := second.Processes(ctx(t))
	if err != nil || len(list) != 1 || list[0].ID != "job" || list[0].Exited != nil {
		t.Fatalf("processes after reconnecting: %+v, %v", list, err)
	}
	var out bytes.Buffer
	exit, err := second.Attach(ctx(t), "job", session.AttachOptions{Offset: 0, Stdin: strings.NewReader("two\n"), Stdout: &out})
	if err != nil || exit == nil || exit.Code != 4 {
		t.Fatalf("attach: exit %+v, %v", exit, err)
	}
	if out.String() != "one\ngot two\n" {
		t.Errorf("output %q", out.String())
	}
	output, next, proc, err := second.Output(ctx(t), "job", 4)
	if err != nil || string(output) != "got two\n" || next != int64(out.Len()) || proc.Exited == nil {
		t.Errorf("output from 4: %q next %d %+v %v", output, next, proc, err)
	}
	if _, err := second.Wait(ctx(t), "job"); err != nil {
		t.Error(err)
	}
	if err := second.Signal(ctx(t), "nothing", "TERM"); err == nil {
		t.Error("signalling a process that does not exist succeeded")
	}
}

func TestTerminalSessionKeepsScrollbackAcrossReattach(t *testing.T) {
	a := agent.New()
	s := serve(t, a)
	_, err := s.Start(ctx(t), session.StartOptions{Name: "shell", Command: []string{"sh"}, TTY: true, Size: &wire.Size{Cols: 100, Rows: 30}})
	if err != nil {
		t.Fatal(err)
	}
	// Attach, type, and drop the connection without detaching cleanly.
	seen := make(chan struct{})
	c, cancel := context.WithCancel(ctx(t))
	in, typed := io.Pipe()
	defer typed.Close()
	go func() {
		_, _ = s.Attach(c, "shell", session.AttachOptions{Stdin: in, Stdout: signalOn("size-30x100", seen)})
	}()
	_, _ = io.WriteString(typed, "echo marker-$((40+2)); echo size-$(stty size | tr ' ' x)\n")
	<-seen
	cancel()
	_ = s.Close()

	again := serve(t, a)
	resize := make(chan wire.Size, 1)
	resize <- wire.Size{Cols: 132, Rows: 43}
	var screen bytes.Buffer
	done := make(chan struct{})
	c2, cancel2 := context.WithCancel(ctx(t))
	defer cancel2()
	in2, typed2 := io.Pipe()
	defer typed2.Close()
	go func() {
		_, _ = again.Attach(c2, "shell", session.AttachOptions{Offset: -1, Stdin: in2, Stdout: signalOn("size-43x132", done), Resize: resize})
	}()
	time.Sleep(200 * time.Millisecond)
	_, _ = io.WriteString(typed2, "echo size-$(stty size | tr ' ' x)\n")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the resized terminal's size never showed")
	}
	cancel2()
	out, _, _, err := again.Output(ctx(t), "shell", -1)
	if err != nil {
		t.Fatal(err)
	}
	screen.Write(out)
	if !strings.Contains(screen.String(), "marker-42") || !strings.Contains(screen.String(), "size-30x100") {
		t.Errorf("scrollback after reattaching lacks the first attach's output: %q", screen.String())
	}
	if err := again.Signal(ctx(t), "shell", "KILL"); err != nil {
		t.Fatal(err)
	}
	p, err := again.Wait(ctx(t), "shell")
	if err != nil || p.Exited == nil || p.Exited.Signal != "KILL" {
		t.Errorf("after KILL: %+v, %v", p, err)
	}
}

func TestFiles(t *testing.T) {
	s := serve(t, agent.New())
	c := ctx(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "a", "b", "data.bin")
	if err := s.Mkdir(c, filepath.Dir(file), 0o750, true); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 700<<10)
	_, _ = rand.Read(data)
	info, err := s.WriteFile(c, file, bytes.NewReader(data), 0o640)
	if err != nil || info.Size != int64(len(data)) || fs.FileMode(info.Mode).Perm() != 0o640 {
		t.Fatalf("write: %+v, %v", info, err)
	}
	var back bytes.Buffer
	if _, n, err := s.ReadFile(c, file, &back, 0); err != nil || n != int64(len(data)) || !bytes.Equal(back.Bytes(), data) {
		t.Fatalf("read back %d bytes, %v", n, err)
	}
	if _, _, err := s.ReadFile(c, file, io.Discard, 1000); err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Errorf("read over the limit: %v", err)
	}
	if _, _, err := s.ReadFile(c, filepath.Join(dir, "missing"), io.Discard, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read of a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := s.WriteFile(c, filepath.Join(dir, "no", "such", "dir", "f"), strings.NewReader("x"), 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write into a missing directory: %v, want fs.ErrNotExist", err)
	}
	other := filepath.Join(dir, "a", "other")
	if _, err := s.WriteFile(c, other, strings.NewReader("other"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(c, other, file, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("rename over an existing file without replace: %v, want fs.ErrExist", err)
	}
	if err := s.Rename(c, other, file, true); err != nil {
		t.Error(err)
	}
	entries, err := s.ReadDir(c, filepath.Join(dir, "a"))
	if err != nil || len(entries) != 1 || entries[0].Name != "b" || !fs.FileMode(entries[0].Mode).IsDir() {
		t.Errorf("entries %+v, %v", entries, err)
	}
	if err := s.Chmod(c, file, 0o600); err != nil {
		t.Error(err)
	}
	if st, err := s.Stat(c, file); err != nil || st.Size != 5 || fs.FileMode(st.Mode).Perm() != 0o600 {
		t.Errorf("stat %+v, %v", st, err)
	}
	if err := s.Remove(c, filepath.Join(dir, "a"), false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("remove of a full directory without recursive: %v", err)
	}
	if err := s.Remove(c, filepath.Join(dir, "a"), true); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("the tree is still there: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestWatchSeesNestedChanges(t *testing.T) {
	s := serve(t, agent.New())
	dir := t.TempDir()
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	events := make(chan wire.Event, 100)
	watching := make(chan error, 1)
	go func() {
		watching <- s.Watch(c, dir, func(ev wire.Event) bool { events <- ev; return true })
	}()
	time.Sleep(200 * time.Millisecond)
	nested := filepath.Join(dir, "x", "y")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the new directories are watched
	file := filepath.Join(nested, "f.txt")
	steps := []struct {
		do   func() error
		want wire.Event
	}{
		{func() error { return os.WriteFile(file, []byte("1"), 0o644) }, wire.Event{Op: "create", Path: file}},
		{func() error { return os.WriteFile(file, []byte("22"), 0o644) }, wire.Event{Op: "write", Path: file}},
		{func() error { return os.Remove(file) }, wire.Event{Op: "remove", Path: file}},
	}
	for _, step := range steps {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(5 * time.Second)
		for found := false; !found; {
			select {
			case ev := <-events:
				found = ev == step.want
			case <-deadline:
				t.Fatalf("no event %+v", step.want)
			}
		}
	}
	cancel()
	if err := <-watching; err != nil {
		t.Errorf("watch ended with %v", err)
	}
}

func TestDialReachesALoopbackPort(t *testing.T) {
	s := serve(t, agent.New())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		line, _ := bufio.NewReader(conn).ReadString('\n')
		_, _ = io.WriteString(conn, "echo: "+line)
		_ = conn.Close()
	}()
	port := l.Addr().(*net.TCPAddr).Port
	conn, err := s.Dial(ctx(t), port)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, "ping\n")
	got, _ := io.ReadAll(conn)
	if string(got) != "echo: ping\n" {
		t.Errorf("got %q", got)
	}
	_ = conn.Close()
	_ = l.Close()
	if _, err := s.Dial(ctx(t), port); err == nil || !strings.Contains(err.Error(), "nothing listens on port") {
		t.Errorf("dial of a closed port: %v", err)
	}
}

func TestActivityCountsForegroundCommands(t *testing.T) {
	s := serve(t, agent.New())
	before, err := s.Activity(ctx(t))
	if err != nil || before.Running != 0 {
		t.Fatalf("%+v, %v", before, err)
	}
	started := make(chan struct{})
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	go func() {
		_, _ = s.Run(c, session.RunOptions{Command: []string{"sh", "-c", "echo go; sleep 30"}, Stdout: signalOn("go", started)})
	}()
	<-started
	during, err := s.Activity(ctx(t))
	if err != nil || during.Running != 1 || !during.Last.After(before.Last) {
		t.Errorf("during a command: %+v (before %+v), %v", during, before, err)
	}
}

func TestVersionMismatchFailsBothWays(t *testing.T) {
	t.Run("a newer agent", func(t *testing.T) {
		client, server := connPair(t)
		go func() {
			_, _ = io.WriteString(server, wire.RoleAgent+" 99\n")
			_, _ = io.Copy(io.Discard, server)
		}()
		_, err := session.Open(client)
		var version *wire.VersionError
		if !errors.As(err, &version) || version.Theirs != 99 || !strings.Contains(err.Error(), "this client is older") {
			t.Errorf("open against a newer agent: %v", err)
		}
	})
	t.Run("an older client", func(t *testing.T) {
		client, server := connPair(t)
		served := make(chan error, 1)
		go func() { served <- agent.New().ServeConn(server) }()
		_, _ = io.WriteString(client, wire.RoleSession+" 0\n")
		var version *wire.VersionError
		if err := <-served; !errors.As(err, &version) || version.Theirs != 0 {
			t.Errorf("agent serving an older client: %v", err)
		}
		_ = client.Close()
	})
	t.Run("not an agent", func(t *testing.T) {
		// The shell has complained and exited before the client's greeting
		// is written, so the write fails; the complaint is still what the
		// error says.
		client, server := connPair(t)
		_, _ = io.WriteString(server, "sh: agentsandbox-agent: not found\n")
		_ = server.Close()
		if _, err := session.Open(client); err == nil || !strings.Contains(err.Error(), `got "sh: agentsandbox-agent: not found"`) {
			t.Errorf("open against a shell's complaint: %v", err)
		}
	})
}

func TestRootConfinesFileOperations(t *testing.T) {
	workspace, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(workspace, "escape")); err != nil {
		t.Fatal(err)
	}
	s := serve(t, agent.New()).WithRoot(workspace)
	c := ctx(t)
	for _, path := range []string{"escape/secret", "../" + filepath.Base(outside) + "/secret", filepath.Join(outside, "secret")} {
		if _, _, err := s.ReadFile(c, path, io.Discard, 0); err == nil {
			t.Errorf("read %s, outside the root", path)
		}
		if _, err := s.WriteFile(c, path, strings.NewReader("x"), 0); err == nil {
			t.Errorf("wrote %s, outside the root", path)
		}
	}
	if err := s.Symlink(c, outside, "made"); err != nil {
		t.Errorf("making a link inside the root: %v", err)
	}
	if st, err := s.Stat(c, "made"); err != nil || st.Link != outside || fs.FileMode(st.Mode)&fs.ModeSymlink == 0 {
		t.Errorf("the link made: %+v, %v", st, err)
	}
	if _, _, err := s.ReadFile(c, "made/secret", io.Discard, 0); err == nil {
		t.Error("read through a link the agent made, out of the root")
	}
	if err := s.Symlink(c, "x", "../elsewhere"); err == nil {
		t.Error("made a link outside the root")
	}
	if err := s.Rename(c, "escape", "moved", false); err != nil {
		t.Errorf("renaming the link itself, inside the root: %v", err)
	}
	if _, err := s.WriteFile(c, filepath.Join(workspace, "inside.txt"), strings.NewReader("ok"), 0); err != nil {
		t.Errorf("an absolute path inside the root: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "s" {
		t.Errorf("the file outside changed: %q, %v", b, err)
	}
}

// TestConnectRelaysToTheDaemon: `agentsandbox-agent connect` finds the
// daemon on its abstract socket and relays a session to it.
func TestConnectRelaysToTheDaemon(t *testing.T) {
	address := startDaemon(t, "@agentsandbox-agent-test-"+strconv.Itoa(os.Getpid()))
	if _, err := agent.Listen(address); err == nil {
		t.Error("a second daemon took the address of the first")
	}
	client, relay := connPair(t)
	go func() { _ = agent.Connect(relay, relay, "/nonexistent/agentsandbox-agent", address) }()
	s, err := session.Open(client)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	if exit, err := s.Run(ctx(t), session.RunOptions{Command: []string{"echo", "through the relay"}, Stdout: &out}); err != nil || exit.Code != 0 || out.String() != "through the relay\n" {
		t.Errorf("run through the relay: %+v %q %v", exit, out.String(), err)
	}
}

// TestConnectHandsOverToTheDaemon: where the exec's stdin and stdout are
// files (pipes, as a container runtime gives an exec), `connect` hands
// them to the daemon, which serves the session on them itself; connect
// exits when the session ends.
func TestConnectHandsOverToTheDaemon(t *testing.T) {
	address := startDaemon(t, "@agentsandbox-agent-handover-"+strconv.Itoa(os.Getpid()))
	stdin, toExec, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromExec, stdout, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	connected := make(chan error, 1)
	go func() {
		connected <- agent.Connect(stdin, stdout, "/nonexistent/agentsandbox-agent", address)
		// The process exits here: its copies of the exec's stdio go.
		_ = stdin.Close()
		_ = stdout.Close()
	}()
	s, err := session.Open(pipeConn{Reader: fromExec, Writer: toExec, closers: []io.Closer{fromExec, toExec}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if exit, err := s.Run(ctx(t), session.RunOptions{Command: []string{"echo", "handed over"}, Stdout: &out}); err != nil || exit.Code != 0 || out.String() != "handed over\n" {
		t.Errorf("run on the handed-over stdio: %+v %q %v", exit, out.String(), err)
	}
	_ = s.Close()
	select {
	case err := <-connected:
		if err != nil {
			t.Errorf("connect ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("connect did not end with its session")
	}
}

// pipeConn is a session's connection made of an exec's two pipes.
type pipeConn struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p pipeConn) Close() error {
	for _, c := range p.closers {
		_ = c.Close()
	}
	return nil
}

// startDaemon serves an agent on address until the test ends.
func startDaemon(t *testing.T, address string) string {
	t.Helper()
	l, err := agent.Listen(address)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = agent.New().Serve(c, l) }()
	return address
}
