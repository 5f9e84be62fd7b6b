package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// These tests run the built binary as a developer would, against the test
// cluster with the reconciler binary running; the exec, cp and port-forward
// paths reach kwok's node server through the API server.

// cliResult is what one run of the binary printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs the agentsandbox binary as the developer, with stdin.
func cli(t *testing.T, dev testcluster.Developer, stdin string, args ...string) cliResult {
	t.Helper()
	return run(t, command(t, dev, args...), stdin)
}

// run runs cmd to its end with stdin.
func run(t *testing.T, cmd *exec.Cmd, stdin string) cliResult {
	t.Helper()
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

func command(t *testing.T, dev testcluster.Developer, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+dev.Kubeconfig)
	return cmd
}

// setup starts the reconciler and returns developers and a template for
// exec (its workspace a host directory, returned too).
func setup(t *testing.T, developers ...string) ([]testcluster.Developer, *v1.SandboxTemplate, string) {
	t.Helper()
	cluster := testcluster.Get(t)
	startReconciler(t, cluster)
	tpl, workspace := cluster.ExecTemplate(t)
	return cluster.Developers(t, developers...), tpl, workspace
}

// claim claims a sandbox from the template with `claim --wait` as the
// developer, deleted when the test ends.
func claim(t *testing.T, dev testcluster.Developer, template string) v1.Sandbox {
	t.Helper()
	res := cli(t, dev, "", "claim", "--template", template, "--wait", "-o", "json")
	var sbx v1.Sandbox
	if err := json.Unmarshal([]byte(res.stdout), &sbx); err != nil {
		t.Fatalf("claim: %+v", res)
	}
	t.Cleanup(func() { cli(t, dev, "", "delete", sbx.Name) })
	return sbx
}

var readyLine = regexp.MustCompile(`sandbox (\S+) ready: (.*)`)

// TestRunDeletesTheSandbox: `run` streams the command's output, exits with
// its code, and deletes the sandbox whether the command fails or the run
// is interrupted.
func TestRunDeletesTheSandbox(t *testing.T) {
	devs, tpl, _ := setup(t, "agent")
	agent := devs[0]

	res := cli(t, agent, "", "run", "--template", tpl.Name, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if res.code != 7 || res.stdout != "out\n" || !strings.Contains(res.stderr, "err\n") {
		t.Errorf("run: code %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	m := readyLine.FindStringSubmatch(res.stderr)
	if m == nil || !strings.Contains(m[2], "cold-started from template "+tpl.Name) || !strings.Contains(res.stderr, "sandbox "+m[1]+" deleted") {
		t.Fatalf("run did not report its sandbox's launch and deletion: %q", res.stderr)
	}
	testcluster.Get(t).SandboxGone(t, m[1])

	// From a pool with no member: run says the sandbox was cold-started.
	admin := testcluster.Get(t).Client
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("empty")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To[int32](0)},
	}
	if err := admin.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	deleteWhileReconciled(t, admin, pool)
	res = cli(t, agent, "", "run", "--pool", pool.Name, "--", "true")
	if m := readyLine.FindStringSubmatch(res.stderr); res.code != 0 || m == nil || !strings.Contains(m[2], "cold-started") || !strings.Contains(m[2], "WarmPool "+pool.Name) {
		t.Errorf("run from an empty pool: %+v", res)
	}
	if res := cli(t, agent, "", "run", "--pool", "no-such-pool", "--", "true"); res.code != 1 || res.stderr != "Error: warm pool no-such-pool not found\n" {
		t.Errorf("run from a missing pool: %+v", res)
	}

	res = cli(t, agent, "", "run", "-q", "--template", tpl.Name, "--", "sh", "-c", "echo quiet")
	if res.code != 0 || res.stdout != "quiet\n" || res.stderr != "" {
		t.Errorf("run -q: code %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	// Interrupted while the command runs.
	cmd := command(t, agent, "run", "--template", tpl.Name, "--", "sleep", "120")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	name := ""
	for name == "" && lines.Scan() {
		if m := readyLine.FindStringSubmatch(lines.Text()); m != nil {
			name = m[1]
		}
	}
	if name == "" {
		_ = cmd.Process.Kill()
		t.Fatal("run never reported a Ready sandbox")
	}
	time.Sleep(500 * time.Millisecond) // the command is running
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Logf("run exited: %v", err) // 130 is an error to Wait; the code is checked below
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("run did not end after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(string(rest), "sandbox "+name+" deleted") {
		t.Errorf("interrupted run: code %d, stderr %q", code, rest)
	}
	testcluster.Get(t).SandboxGone(t, name)
}

// TestSandboxCommands walks a sandbox through the everyday commands.
func TestSandboxCommands(t *testing.T) {
	devs, tpl, workspace := setup(t, "alice", "bob")
	alice, bob := devs[0], devs[1]

	res := cli(t, alice, "", "claim", "--template", tpl.Name, "--ttl", "1h", "--wait", "-o", "json")
	var sbx v1.Sandbox
	if err := json.Unmarshal([]byte(res.stdout), &sbx); res.code != 0 || err != nil {
		t.Fatalf("claim: code %d, %v, stdout %q, stderr %q", res.code, err, res.stdout, res.stderr)
	}
	name := sbx.Name
	t.Cleanup(func() { cli(t, alice, "", "delete", name) })
	if sbx.Spec.Owner != alice.Name || sbx.Status.Phase != v1.SandboxPhaseRunning || !strings.Contains(res.stderr, "sandbox "+name+": Running") {
		t.Errorf("claimed %s owned by %s in phase %s; progress %q", name, sbx.Spec.Owner, sbx.Status.Phase, res.stderr)
	}

	if res := cli(t, alice, "", "exec", name, "--", "no-such-program", "x"); res.code != 127 || res.stderr != "no-such-program: command not found\n" {
		t.Errorf("exec of a missing program: exit %d, stderr %q; want 127 and a shell's words", res.code, res.stderr)
	}
	if res := cli(t, alice, "", "exec", name, "--", "sh", "-c", "echo hi; kill -KILL $$"); res.code != 137 || res.stdout != "hi\n" ||
		res.stderr != "Error: killed by signal KILL\n" {
		t.Errorf("exec of a command killed by SIGKILL: %+v; want exit 137 and the signal named", res)
	}
	if res := cli(t, alice, "", "exec", name, "--", "sh", "-c", "echo hi; exit 4"); res.code != 4 || res.stdout != "hi\n" {
		t.Errorf("exec: code %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if res := cli(t, alice, "a line\n", "exec", "-i", name, "--", "sh", "-c", `read l; echo "[$l]"`); res.code != 0 || res.stdout != "[a line]\n" {
		t.Errorf("exec -i: code %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	// -t off a terminal falls back to plain streams, as kubectl does.
	if res := cli(t, alice, "", "exec", "-t", name, "--", "sh", "-c", "test -t 1 || echo plain"); res.code != 0 || res.stdout != "plain\n" || !strings.Contains(res.stderr, "Unable to use a TTY") {
		t.Errorf("exec -t without a terminal: %+v", res)
	}

	local := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(local, []byte("payload\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := cli(t, alice, "", "cp", local, name+":"); res.code != 0 {
		t.Fatalf("cp in: %+v", res)
	}
	if got, err := os.ReadFile(filepath.Join(workspace, "in.txt")); err != nil || string(got) != "payload\n" {
		t.Errorf("the file in the workspace: %q %v", got, err)
	}
	back := t.TempDir()
	if res := cli(t, alice, "", "cp", name+":in.txt", back); res.code != 0 {
		t.Fatalf("cp out: %+v", res)
	}
	if got, err := os.ReadFile(filepath.Join(back, "in.txt")); err != nil || string(got) != "payload\n" {
		t.Errorf("the file copied back: %q %v", got, err)
	}
	if res := cli(t, alice, "", "cp", "--limit", "3", name+":in.txt", "-"); res.code != 1 || res.stdout != "" || !strings.HasPrefix(res.stderr, "Error: file larger than the limit") || strings.Count(res.stderr, "\n") != 1 {
		t.Errorf("cp over the limit: %+v", res)
	}

	tree := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "sub", "f"), []byte("in a tree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := cli(t, alice, "", "cp", tree, name+":"); res.code != 1 || !strings.Contains(res.stderr, "is a directory (copy it with -r)") {
		t.Errorf("cp of a directory without -r: %+v", res)
	}
	if res := cli(t, alice, "", "cp", "-r", tree, name+":"); res.code != 0 {
		t.Fatalf("cp -r in: %+v", res)
	}
	if res := cli(t, alice, "", "cp", "-r", name+":tree", back); res.code != 0 {
		t.Fatalf("cp -r out: %+v", res)
	}
	if got, err := os.ReadFile(filepath.Join(back, "tree", "sub", "f")); err != nil || string(got) != "in a tree\n" {
		t.Errorf("the tree copied back: %q %v", got, err)
	}
	if res := cli(t, alice, "", "cp", name+":../../etc/passwd", "-"); res.code != 1 || res.stdout != "" || !strings.Contains(res.stderr, "leaves the workspace") {
		t.Errorf("cp out of the workspace: %+v", res)
	}

	if res := cli(t, alice, "", "logs", name); res.code != 0 || !strings.Contains(res.stdout, "hello from the sandbox pod") {
		t.Errorf("logs: %+v", res)
	}
	res = cli(t, alice, "", "list", "-o", "yaml")
	if res.code != 0 || !strings.Contains(res.stdout, "name: "+name) || !strings.Contains(res.stdout, "kind: List") {
		t.Errorf("list -o yaml: %+v", res)
	}
	res = cli(t, bob, "", "list", "--owner", alice.Name, "--template", tpl.Name, "--phase", "Running", "--page-size", "1", "-o", "yaml")
	if res.code != 0 || !strings.Contains(res.stdout, "name: "+name) || strings.Count(res.stdout, "kind: Sandbox\n") != 1 {
		t.Errorf("list --owner alice --template --phase Running: %+v", res)
	}
	if res := cli(t, alice, "", "list", "--template", tpl.Name, "--phase", "Stopped", "-o", "yaml"); res.code != 0 || strings.Contains(res.stdout, "kind: Sandbox\n") {
		t.Errorf("list --phase Stopped: %+v; want no sandbox", res)
	}
	if res := cli(t, alice, "", "list", "--template", tpl.Name, "-o", "name"); res.code != 0 || res.stdout != name+"\n" {
		t.Errorf("list -o name: %+v; want the name alone", res)
	}
	if res := cli(t, alice, "", "claim", "--template", tpl.Name, "-o", "name"); res.code != 0 || !regexp.MustCompile(`^`+tpl.Name+`-[a-z0-9]{5}\n$`).MatchString(res.stdout) {
		t.Errorf("claim -o name: %+v; want the new sandbox's name alone", res)
	} else if del := cli(t, alice, "", "delete", strings.TrimSpace(res.stdout)); del.code != 0 {
		t.Errorf("delete of the sandbox claim -o name named: %+v", del)
	}
	if res := cli(t, alice, "", "list", "-o", "wide"); res.code != 1 || !strings.Contains(res.stderr, `unknown output format "wide": use json, yaml or name`) {
		t.Errorf("list -o wide: %+v", res)
	}
	if res := cli(t, alice, "", "list", "--phase", "running"); res.code != 1 || !strings.Contains(res.stderr, `--phase "running": want one of [Pending Starting Running`) {
		t.Errorf("list --phase running: %+v", res)
	}
	if res := cli(t, alice, "", "get", name); res.code != 0 || !regexp.MustCompile(name+` +Running +Running +Cold +`+regexp.QuoteMeta(alice.Name)).MatchString(res.stdout) {
		t.Errorf("get: %+v", res)
	}

	res = cli(t, bob, "", "exec", name, "--", "true")
	for _, part := range []string{"user " + bob.Name, "may not exec in sandbox " + name, "not its owner (" + alice.Name + ")"} {
		if res.code != 1 || !strings.Contains(res.stderr, part) {
			t.Errorf("bob's exec: code %d, stderr %q does not say %q", res.code, res.stderr, part)
		}
	}
	if res := cli(t, bob, "", "delete", name); res.code != 1 || !strings.Contains(res.stderr, "not its owner") {
		t.Errorf("bob's delete: %+v", res)
	}
	// --as: an administrator acts as alice, or as bob, with what each may do.
	admin := testcluster.Developer{Name: "admin", Kubeconfig: testcluster.Get(t).Kubeconfig}
	if res := cli(t, admin, "", "exec", "--as", alice.Name, name, "--", "sh", "-c", "echo as alice"); res.code != 0 || res.stdout != "as alice\n" {
		t.Errorf("exec --as the owner: %+v", res)
	}
	if res := cli(t, admin, "", "exec", "--as", bob.Name, name, "--", "true"); res.code != 1 || !strings.Contains(res.stderr, "user "+bob.Name+") may not exec") {
		t.Errorf("exec --as bob: %+v", res)
	}

	if res := cli(t, alice, "", "stop", "--wait", name); res.code != 0 || !strings.Contains(res.stdout, "stopped") {
		t.Fatalf("stop: %+v", res)
	}
	if res := cli(t, alice, "", "exec", name, "--", "true"); res.code != 1 || !strings.Contains(res.stderr, "is not ready (phase Stopped)") {
		t.Errorf("exec in a stopped sandbox: %+v", res)
	}
	if res := cli(t, alice, "", "start", "--wait", name); res.code != 0 {
		t.Fatalf("start: %+v", res)
	}
	if res := cli(t, alice, "", "delete", name); res.code != 0 {
		t.Fatalf("delete: %+v", res)
	}
	testcluster.Get(t).SandboxGone(t, name)
	if res := cli(t, alice, "", "get", name); res.code != 1 || res.stderr != "Error: sandbox "+name+" not found\n" {
		t.Errorf("get after delete: %+v", res)
	}
}

// TestPortForwardCommand forwards a free local port to port 7 of a sandbox
// (echoed by the local cluster's node) until interrupted.
func TestPortForwardCommand(t *testing.T) {
	devs, tpl, _ := setup(t, "alice")
	alice := devs[0]
	sbx := claim(t, alice, tpl.Name)

	cmd := command(t, alice, "port-forward", sbx.Name, ":7")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	lines := bufio.NewScanner(stdout)
	var port int
	if !lines.Scan() {
		t.Fatal("port-forward printed nothing")
	}
	if _, err := fmt.Sscanf(lines.Text(), "forwarding %d -> ", &port); err != nil {
		t.Fatalf("port-forward said %q", lines.Text())
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, "through the API server\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || got != "through the API server\n" {
		t.Errorf("echo: %q %v", got, err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("port-forward after SIGINT: %v", err)
	}
}

func TestSplitRemote(t *testing.T) {
	for _, tc := range []struct {
		arg, name, path string
		remote          bool
	}{
		{"sbx:a/b", "sbx", "a/b", true},
		{"sbx:", "sbx", "", true},
		{"./a:b", "", "./a:b", false},
		{"/tmp/x", "", "/tmp/x", false},
		{":x", "", ":x", false},
	} {
		name, p, remote := splitRemote(tc.arg)
		if name != tc.name || p != tc.path || remote != tc.remote {
			t.Errorf("splitRemote(%q) = %q, %q, %v", tc.arg, name, p, remote)
		}
	}
}
