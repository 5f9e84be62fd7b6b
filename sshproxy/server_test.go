package sshproxy_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testterm"
)

// TestSSH reaches a sandbox over SSH through the proxy: commands with
// their streams and exit codes, an interactive terminal that follows
// resizes, a 20 MiB file both ways byte-identical over sftp and with
// OpenSSH's scp, the workspace's bounds, forwarded ports, and bob refused
// at alice's sandbox with the API server's reason.
func TestSSH(t *testing.T) {
	cluster := testcluster.Get(t)
	tpl, workspace := cluster.ExecTemplate(t)
	devs := cluster.Developers(t, "alice", "bob")
	alice, bob := devs[0], devs[1]
	_, sbx := alice.Claim(t, tpl.Name)
	alices := serve(t, alice, sbx.Name)
	client := alices.connect(t)

	t.Run("command", func(t *testing.T) {
		s := newSession(t, client)
		// As ssh sends it for the ssh-config block's SendEnv LANG.
		if err := s.Setenv("LANG", "C.UTF-8"); err != nil {
			t.Fatal(err)
		}
		s.Stdin = strings.NewReader("hello world")
		stdout, stderr := outputs(s)
		err := s.Run(`head -c 5; echo " $LANG"; echo to-stderr >&2; exit 7`)
		if exitStatus(err) != 7 || stdout.String() != "hello C.UTF-8\n" || !strings.Contains(stderr.String(), "to-stderr") {
			t.Errorf("a command: %v, stdout %q, stderr %q; want exit 7, stdin read and LANG passed on stdout, stderr apart", err, stdout, stderr)
		}
		if strings.Contains(stdout.String(), "to-stderr") {
			t.Errorf("stderr reached stdout: %q", stdout)
		}
	})

	t.Run("shell without a terminal", func(t *testing.T) {
		s := newSession(t, client)
		s.Stdin = strings.NewReader("echo from-the-shell\nexit 3\n")
		stdout, stderr := outputs(s)
		if err := s.Shell(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); exitStatus(err) != 3 || !strings.Contains(stdout.String(), "from-the-shell") {
			t.Errorf("a shell with a script on stdin: %v, stdout %q, stderr %q", err, stdout, stderr)
		}
	})

	t.Run("interactive terminal", func(t *testing.T) {
		s := newSession(t, client)
		if err := s.RequestPty("xterm-agentsandbox", 30, 100, ssh.TerminalModes{}); err != nil {
			t.Fatal(err)
		}
		keys, err := s.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		screen := &testterm.Screen{}
		s.Stdout = screen
		if err := s.Start(`echo "term $TERM"; ` + testterm.ResizeScript + `; exit 4`); err != nil {
			t.Fatal(err)
		}
		screen.Wait(t, "term xterm-agentsandbox")
		screen.Wait(t, "30 100")
		if err := s.WindowChange(40, 120); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(keys, "hello\r"); err != nil {
			t.Fatal(err)
		}
		screen.Wait(t, "typed hello")
		screen.Wait(t, "40 120")
		if err := s.Wait(); exitStatus(err) != 4 {
			t.Errorf("a command on a terminal: %v, want exit status 4; screen %q", err, screen.String())
		}
	})

	t.Run("a command killed by a signal", func(t *testing.T) {
		// As sshd: exit-signal, not an exit status and no error message.
		s := newSession(t, client)
		stdout, stderr := outputs(s)
		err := s.Run("echo before; kill -KILL $$")
		var exit *ssh.ExitError
		if !errors.As(err, &exit) || exit.Signal() != "KILL" || stdout.String() != "before\n" || strings.Contains(stderr.String(), "agentsandbox:") {
			t.Errorf("a command that kills itself: %v, stdout %q, stderr %q; want exit-signal KILL, no error", err, stdout, stderr)
		}
	})

	data := make([]byte, 20<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}

	t.Run("sftp carries 20 MiB both ways", func(t *testing.T) {
		c := newSFTP(t, client)
		put(t, c, "up.bin", data)
		sameFile(t, "sftp put", filepath.Join(workspace, "up.bin"), data)
		if err := c.Mkdir("dir"); err != nil {
			t.Fatal(err)
		}
		// What OpenSSH's sftp sends for rename.
		if err := c.PosixRename("up.bin", "dir/moved.bin"); err != nil {
			t.Fatal(err)
		}
		entries, err := c.ReadDir("dir")
		if err != nil || !slices.ContainsFunc(entries, func(e os.FileInfo) bool { return e.Name() == "moved.bin" && e.Size() == int64(len(data)) }) {
			t.Errorf("ls dir: %v %v", entries, err)
		}
		if got := get(t, c, "dir/moved.bin"); !bytes.Equal(got, data) {
			t.Errorf("sftp get: %d bytes that differ from the %d sent", len(got), len(data))
		}
		if err := c.Remove("dir/moved.bin"); err != nil {
			t.Fatal(err)
		}
		if err := c.RemoveDirectory("dir"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(workspace, "dir")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("sftp rmdir left dir behind: %v", err)
		}
	})

	// OpenSSH's scp speaks SFTP, as a client of its own: it sets an
	// uploaded file's size and mode on its open handle.
	openssh := alices.openSSH()
	t.Run("scp carries 20 MiB both ways", func(t *testing.T) {
		local := t.TempDir()
		src := filepath.Join(local, "big.bin")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if code, stderr := scp(t, openssh, src, "127.0.0.1:big.bin"); code != 0 {
			t.Fatalf("scp up: exit %d, %s", code, stderr)
		}
		sameFile(t, "scp up", filepath.Join(workspace, "big.bin"), data)
		back := filepath.Join(local, "back.bin")
		if code, stderr := scp(t, openssh, "127.0.0.1:big.bin", back); code != 0 {
			t.Fatalf("scp down: exit %d, %s", code, stderr)
		}
		sameFile(t, "scp down", back, data)
	})

	t.Run("paths stay in the workspace", func(t *testing.T) {
		// kwok runs the sandbox's commands on this host: the file outside
		// the workspace is one of the test's own.
		secret := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(secret, []byte("outside"), 0o600); err != nil {
			t.Fatal(err)
		}
		relative, err := filepath.Rel(workspace, secret)
		if err != nil || !strings.HasPrefix(relative, "..") {
			t.Fatalf("relative path of %s from %s: %q %v", secret, workspace, relative, err)
		}
		local := t.TempDir()
		upload := filepath.Join(local, "upload")
		if err := os.WriteFile(upload, []byte("overwritten"), 0o600); err != nil {
			t.Fatal(err)
		}
		c := newSFTP(t, client)
		for _, remote := range []string{secret, relative} {
			if f, err := c.Open(remote); err == nil {
				_ = f.Close()
				t.Errorf("sftp open %s: want it refused", remote)
			}
			dst := filepath.Join(local, "copy")
			if code, _ := scp(t, openssh, "127.0.0.1:"+remote, dst); code == 0 {
				t.Errorf("scp from %s: want it refused", remote)
			}
			if _, err := os.Stat(dst); err == nil {
				t.Errorf("scp from %s copied something", remote)
			}
			if code, _ := scp(t, openssh, upload, "127.0.0.1:"+remote); code == 0 {
				t.Errorf("scp to %s: want it refused", remote)
			}
		}
		if got, _ := os.ReadFile(secret); string(got) != "outside" {
			t.Errorf("the file outside the workspace now holds %q", got)
		}
	})

	t.Run("local forwarding", func(t *testing.T) {
		// What ssh -L asks for: the sandbox's echo port.
		echo, err := client.Dial("tcp", "localhost:7")
		if err != nil {
			t.Fatal(err)
		}
		defer echo.Close()
		if _, err := io.WriteString(echo, "through ssh -L\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := bufio.NewReader(echo).ReadString('\n'); err != nil || got != "through ssh -L\n" {
			t.Errorf("the sandbox's echo port: %q %v", got, err)
		}
		// Elsewhere than the sandbox's own ports is refused, with a reason.
		if other, err := client.Dial("tcp", "example.com:80"); err == nil {
			_ = other.Close()
			t.Error("a forward to example.com:80 was opened")
		} else if !strings.Contains(err.Error(), "only the sandbox's own ports can be forwarded") {
			t.Errorf("a forward to example.com:80 refused with %q, which does not say why", err)
		}
		// A port nothing serves: the connection ends, and why is said as
		// kubectl port-forward says it.
		closed, err := client.Dial("tcp", "localhost:9")
		if err != nil {
			t.Fatal(err)
		}
		defer closed.Close()
		if n, err := closed.Read(make([]byte, 1)); err == nil {
			t.Errorf("a forward to a port nothing serves carried %d bytes", n)
		}
		alices.stderr.Wait(t, "agentsandbox: forwarding to localhost:9: ")
	})

	t.Run("bob is refused at alice's sandbox", func(t *testing.T) {
		start := time.Now()
		bobs := serve(t, bob, sbx.Name)
		if c, err := bobs.dial(); err == nil {
			_ = c.Close()
			t.Error("bob connected to alice's sandbox")
		}
		for _, part := range []string{"user " + bob.Name, "not its owner (" + alice.Name + ")"} {
			bobs.stderr.Wait(t, part)
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("bob's refusal took %s", d)
		}
		if code, _ := scp(t, bobs.openSSH(), "127.0.0.1:big.bin", t.TempDir()); code == 0 {
			t.Error("bob's scp of alice's file succeeded")
		}
	})
}

// TestWakesAnIdleSandbox: a command over SSH wakes a sandbox stopped for
// idleness, and runs.
func TestWakesAnIdleSandbox(t *testing.T) {
	cluster := testcluster.Get(t)
	tpl, _ := cluster.IdleTemplate(t, 3*time.Second)
	alice := cluster.Developers(t, "alice")[0]
	_, sbx := alice.Claim(t, tpl.Name)
	cluster.WaitIdleStopped(t, sbx.Name)
	s := newSession(t, serve(t, alice, sbx.Name).connect(t))
	stdout, stderr := outputs(s)
	if err := s.Run("echo ssh"); err != nil || stdout.String() != "ssh\n" {
		t.Errorf("a command in an idle-stopped sandbox: %v, stdout %q, stderr %q", err, stdout, stderr)
	}
}

// newSession opens a session, as each ssh command opens one, closed when
// the test ends.
func newSession(t *testing.T, c *ssh.Client) *ssh.Session {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// outputs collects the session's stdout and stderr.
func outputs(s *ssh.Session) (stdout, stderr *bytes.Buffer) {
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	s.Stdout, s.Stderr = stdout, stderr
	return stdout, stderr
}

// exitStatus is the exit status a session ended with: 0 for no error, -1
// for one that is not an exit status.
func exitStatus(err error) int {
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitStatus()
	}
	return -1
}

// newSFTP starts the sftp subsystem, as sftp does, closed when the test
// ends.
func newSFTP(t *testing.T, c *ssh.Client) *sftp.Client {
	t.Helper()
	s, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// put writes data to the file, as sftp's put does: the upload is checked
// when the file is closed.
func put(t *testing.T, c *sftp.Client, path string, data []byte) {
	t.Helper()
	f, err := c.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatalf("sftp put %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("sftp put %s: %v", path, err)
	}
}

// get reads the file, as sftp's get does.
func get(t *testing.T, c *sftp.Client, path string) []byte {
	t.Helper()
	f, err := c.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got bytes.Buffer
	if _, err := f.WriteTo(&got); err != nil {
		t.Fatalf("sftp get %s: %v", path, err)
	}
	return got.Bytes()
}

// scp runs OpenSSH's scp with the options to reach the proxy, and returns
// its exit code and stderr.
func scp(t *testing.T, options []string, args ...string) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("scp"); err != nil {
		t.Fatal("scp not found: install Debian's openssh-client (make test does)")
	}
	cmd := exec.Command("scp", append(options, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("scp %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func sameFile(t *testing.T, what, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %s has %d bytes that differ from the %d sent", what, path, len(got), len(want))
	}
}
