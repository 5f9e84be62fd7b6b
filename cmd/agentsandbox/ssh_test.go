//go:build linux

package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// sshClient runs Debian's OpenSSH client binaries with the configuration
// `agentsandbox ssh-config` printed, as a developer who appended it to
// ~/.ssh/config would.
type sshClient struct {
	t      *testing.T
	config string
	dev    testcluster.Developer
}

// newSSHClient writes alice's ssh configuration (the printed Host block, and
// nothing else: -F leaves ~/.ssh/config out) with the host key under a
// directory of the test's own.
func newSSHClient(t *testing.T, dev testcluster.Developer) *sshClient {
	t.Helper()
	for _, tool := range []string{"ssh", "scp", "sftp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install Debian's openssh-client (make test does)", tool)
		}
	}
	dir := t.TempDir()
	res := cli(t, dev, "", "ssh-config", "--key-dir", filepath.Join(dir, "keys"))
	if res.code != 0 {
		t.Fatalf("ssh-config: %+v", res)
	}
	for _, want := range []string{"Host *.sandbox", "ProxyCommand ", " ssh-proxy ", "StrictHostKeyChecking yes", "HostKeyAlias agentsandbox"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("ssh-config printed no %q:\n%s", want, res.stdout)
		}
	}
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte(res.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	return &sshClient{t: t, config: config, dev: dev}
}

// as is the same configuration used with another developer's kubeconfig.
func (c *sshClient) as(dev testcluster.Developer) *sshClient {
	return &sshClient{t: c.t, config: c.config, dev: dev}
}

// command is one of ssh, scp or sftp with the configuration, in batch mode
// (no prompt can hang a test), as the developer.
func (c *sshClient) command(tool string, args ...string) *exec.Cmd {
	cmd := exec.Command(tool, append([]string{"-F", c.config, "-o", "BatchMode=yes"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.dev.Kubeconfig, "LANG=C.UTF-8")
	// The proxy ssh starts shares its stderr: if ssh is killed, Wait must
	// not wait for the proxy to close it.
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs the tool to its end with stdin.
func (c *sshClient) run(stdin string, tool string, args ...string) cliResult {
	c.t.Helper()
	cmd := c.command(tool, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		c.t.Fatalf("%s %s: %v", tool, strings.Join(args, " "), err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// TestSSH reaches a sandbox with plain ssh, scp and sftp through
// `agentsandbox ssh-proxy`: commands with their streams and exit codes, an
// interactive terminal that follows resizes, a 20 MiB file both ways
// byte-identical, the workspace's bounds, a forwarded port, and bob refused
// at alice's sandbox with the API server's reason.
func TestSSH(t *testing.T) {
	devs, tpl, workspace := setup(t, "alice", "bob")
	alice, bob := devs[0], devs[1]
	res := cli(t, alice, "", "claim", "--template", tpl.Name, "--wait", "-o", "json")
	var sbx v1.Sandbox
	if err := json.Unmarshal([]byte(res.stdout), &sbx); err != nil {
		t.Fatalf("claim: %+v", res)
	}
	t.Cleanup(func() { cli(t, alice, "", "delete", sbx.Name) })
	host := sbx.Name + ".sandbox"
	ssh := newSSHClient(t, alice)

	t.Run("command", func(t *testing.T) {
		res := ssh.run("hello world", "ssh", host, `head -c 5; echo " $LANG"; echo to-stderr >&2; exit 7`)
		if res.code != 7 || res.stdout != "hello C.UTF-8\n" || !strings.Contains(res.stderr, "to-stderr") {
			t.Errorf("ssh %s CMD: %+v; want exit 7, stdin read and LANG passed on stdout, stderr apart", host, res)
		}
		if strings.Contains(res.stdout, "to-stderr") {
			t.Errorf("stderr reached stdout: %+v", res)
		}
	})

	t.Run("shell without a terminal", func(t *testing.T) {
		res := ssh.run("echo from-the-shell\nexit 3\n", "ssh", "-T", host)
		if res.code != 3 || !strings.Contains(res.stdout, "from-the-shell") {
			t.Errorf("ssh -T %s with a script on stdin: %+v", host, res)
		}
	})

	t.Run("interactive terminal", func(t *testing.T) {
		cmd := ssh.command("ssh", "-tt", host, `echo "term $TERM"; `+resizeScript+`; exit 4`)
		cmd.Env = append(cmd.Env, "TERM=xterm-agentsandbox")
		master, screen := onTerminal(t, cmd, 30, 100)
		screen.wait(t, "term xterm-agentsandbox")
		screen.wait(t, "30 100")
		setSize(t, master, 40, 120) // ssh hears SIGWINCH and sends window-change
		if _, err := master.WriteString("hello\r"); err != nil {
			t.Fatal(err)
		}
		screen.wait(t, "typed hello")
		screen.wait(t, "40 120")
		var exit *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 4 {
			t.Errorf("ssh -tt: %v, want exit status 4; screen %q", err, screen.String())
		}
	})

	t.Run("a command killed by a signal", func(t *testing.T) {
		// As sshd: exit-signal, not an exit status and no error message;
		// ssh then exits 255 and names the signal in its debug output.
		res := ssh.run("", "ssh", "-v", host, "echo before; kill -KILL $$")
		if res.code != 255 || res.stdout != "before\n" || !strings.Contains(res.stderr, "exit-signal") ||
			strings.Contains(res.stderr, "agentsandbox:") {
			t.Errorf("ssh a command that kills itself: %+v; want exit 255 after the exit-signal request, no error", res)
		}
	})

	t.Run("scp and sftp carry 20 MiB both ways", func(t *testing.T) {
		local := t.TempDir()
		data := make([]byte, 20<<20)
		if _, err := rand.Read(data); err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(local, "big.bin")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if res := ssh.run("", "scp", src, host+":big.bin"); res.code != 0 {
			t.Fatalf("scp up: %+v", res)
		}
		sameFile(t, "scp up", filepath.Join(workspace, "big.bin"), data)
		back := filepath.Join(local, "back.bin")
		if res := ssh.run("", "scp", host+":big.bin", back); res.code != 0 {
			t.Fatalf("scp down: %+v", res)
		}
		sameFile(t, "scp down", back, data)

		batch := fmt.Sprintf("put %s up.bin\nmkdir dir\nrename up.bin dir/moved.bin\nls -l dir\nget dir/moved.bin %s\nrm dir/moved.bin\nrmdir dir\n",
			src, filepath.Join(local, "sftp.bin"))
		res := ssh.run(batch, "sftp", "-b", "-", host)
		if res.code != 0 || !strings.Contains(res.stdout, "moved.bin") {
			t.Fatalf("sftp batch: %+v", res)
		}
		sameFile(t, "sftp get", filepath.Join(local, "sftp.bin"), data)
		if _, err := os.Stat(filepath.Join(workspace, "dir")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("sftp rmdir left dir behind: %v", err)
		}
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
		for _, remote := range []string{secret, relative} {
			dst := filepath.Join(local, "copy")
			res := ssh.run(fmt.Sprintf("get %s %s\n", remote, dst), "sftp", "-b", "-", host)
			if _, err := os.Stat(dst); res.code == 0 || err == nil {
				t.Errorf("sftp get %s: %+v; want it refused, and nothing copied", remote, res)
			}
			if res := ssh.run("", "scp", host+":"+remote, dst); res.code == 0 {
				t.Errorf("scp from %s: %+v; want it refused", remote, res)
			}
			if res := ssh.run("", "scp", upload, host+":"+remote); res.code == 0 {
				t.Errorf("scp to %s: %+v; want it refused", remote, res)
			}
		}
		if got, _ := os.ReadFile(secret); string(got) != "outside" {
			t.Errorf("the file outside the workspace now holds %q", got)
		}
	})

	t.Run("local forwarding", func(t *testing.T) {
		port := freePort(t)
		cmd := ssh.command("ssh", "-N", "-o", "ExitOnForwardFailure=yes",
			"-L", fmt.Sprintf("127.0.0.1:%d:localhost:7", port), "-L", fmt.Sprintf("127.0.0.1:%d:example.com:80", port+1),
			"-L", fmt.Sprintf("127.0.0.1:%d:localhost:9", port+2), host)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		echo := dialEventually(t, port)
		defer func() { _ = echo.Close() }()
		_ = echo.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(echo, "through ssh -L\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := bufio.NewReader(echo).ReadString('\n'); err != nil || got != "through ssh -L\n" {
			t.Errorf("the sandbox's echo port through ssh -L: %q %v", got, err)
		}
		// Elsewhere than the sandbox's own ports is refused, with a reason.
		other := dialEventually(t, port+1)
		_ = other.SetDeadline(time.Now().Add(20 * time.Second))
		if n, err := other.Read(make([]byte, 1)); err == nil {
			t.Errorf("a forward to example.com:80 carried %d bytes", n)
		}
		_ = other.Close()
		testcluster.Eventually(t, "ssh reports the refusal", func() (bool, string) {
			return strings.Contains(stderr.String(), "only the sandbox's own ports can be forwarded"), stderr.String()
		})
		// A port nothing serves: the connection ends, and why is said as
		// kubectl port-forward says it.
		closed := dialEventually(t, port+2)
		_ = closed.SetDeadline(time.Now().Add(20 * time.Second))
		if n, err := closed.Read(make([]byte, 1)); err == nil {
			t.Errorf("a forward to a port nothing serves carried %d bytes", n)
		}
		_ = closed.Close()
		testcluster.Eventually(t, "ssh-proxy says why the forward to port 9 ended", func() (bool, string) {
			return strings.Contains(stderr.String(), "agentsandbox: forwarding to localhost:9: "), stderr.String()
		})
	})

	t.Run("bob is refused at alice's sandbox", func(t *testing.T) {
		start := time.Now()
		res := ssh.as(bob).run("", "ssh", host, "true")
		for _, part := range []string{"user " + bob.Name, "not its owner (" + alice.Name + ")"} {
			if res.code == 0 || !strings.Contains(res.stderr, part) {
				t.Errorf("bob's ssh: %+v; want a non-zero exit and stderr saying %q", res, part)
			}
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("bob's refusal took %s", d)
		}
		if res := ssh.as(bob).run("", "scp", host+":big.bin", t.TempDir()); res.code == 0 {
			t.Errorf("bob's scp of alice's file: %+v", res)
		}
	})
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

// freePort is a local port free at the time of the call, with the one
// after it.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if next, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1)); err == nil {
			_ = next.Close()
			return port
		}
	}
	t.Fatal("no two free ports in a row")
	return 0
}

// dialEventually connects to a local port once the ssh client listens.
func dialEventually(t *testing.T, port int) net.Conn {
	t.Helper()
	var conn net.Conn
	testcluster.Eventually(t, fmt.Sprintf("ssh listening on port %d", port), func() (bool, string) {
		var err error
		conn, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		return err == nil, fmt.Sprint(err)
	})
	return conn
}
