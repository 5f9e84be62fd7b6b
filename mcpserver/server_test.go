package mcpserver_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/mcpserver"
)

// TestTools drives the tools as a coding agent does, with the go-sdk's
// client: the tools and their schemas, a sandbox's whole life, run_once
// leaving nothing behind whether the command succeeds, fails or times out,
// and bob refused at alice's sandbox with the API server's words.
func TestTools(t *testing.T) {
	cluster := testcluster.Get(t)
	tpl, workspace := cluster.ExecTemplate(t)
	devs := cluster.Developers(t, "alice", "bob")
	alice, bob := devs[0], devs[1]
	s := connect(t, alice, mcpserver.Options{Lifetime: 30 * time.Minute, OutputLimit: 16})

	t.Run("tools and schemas", func(t *testing.T) {
		list, err := s.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"create_sandbox", "delete_sandbox", "list_files", "list_sandboxes", "list_templates",
			"read_file", "run_command", "run_once", "start_sandbox", "stop_sandbox", "write_file"}
		var got []string
		for _, tool := range list.Tools {
			got = append(got, tool.Name)
			if tool.Description == "" {
				t.Errorf("%s has no description", tool.Name)
			}
			schema, ok := tool.InputSchema.(map[string]any)
			if !ok || schema["type"] != "object" {
				t.Errorf("%s: input schema %v is not an object schema", tool.Name, tool.InputSchema)
			}
			for _, field := range []string{"kubeconfig", "token", "context", "as"} {
				if props, _ := schema["properties"].(map[string]any); props[field] != nil {
					t.Errorf("%s accepts %q from the agent: identity must be the process's", tool.Name, field)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("tools %v, want %v", got, want)
		}
		for _, tool := range list.Tools {
			if tool.Name == "run_command" {
				required, _ := tool.InputSchema.(map[string]any)["required"].([]any)
				if !slices.Contains(required, any("sandbox")) || !slices.Contains(required, any("command")) || slices.Contains(required, any("stdin")) {
					t.Errorf("run_command requires %v; want sandbox and command, not stdin", required)
				}
			}
		}
	})

	if _, toolErr := call[mcpserver.Sandbox](t, s, "create_sandbox", map[string]any{"template": tpl.Name, "lifetime": "5h"}); !strings.Contains(toolErr, "longer than this server allows (30m0s)") {
		t.Errorf("a lifetime above the server's: %q", toolErr)
	}
	sbx := create(t, s, tpl.Name)
	if !sbx.Ready || sbx.Owner != alice.Name || sbx.Template != tpl.Name || sbx.Expires == "" || sbx.Workspace != workspace {
		t.Fatalf("create_sandbox returned %+v; want a Ready sandbox of %s from %s with an expiry, its workspace at %s", sbx, alice.Name, tpl.Name, workspace)
	}
	// The template is Ready by now: the sandbox started from it.
	templates := must[struct {
		Templates []mcpserver.Template `json:"templates"`
	}](t, s, "list_templates", map[string]any{})
	if !slices.ContainsFunc(templates.Templates, func(x mcpserver.Template) bool { return x.Name == tpl.Name && x.Ready }) {
		t.Errorf("list_templates %+v lacks the ready template %s", templates.Templates, tpl.Name)
	}
	mine := must[struct {
		Sandboxes []mcpserver.Sandbox `json:"sandboxes"`
	}](t, s, "list_sandboxes", map[string]any{})
	if !slices.ContainsFunc(mine.Sandboxes, func(x mcpserver.Sandbox) bool { return x.Name == sbx.Name }) {
		t.Errorf("list_sandboxes %+v lacks %s", mine.Sandboxes, sbx.Name)
	}

	t.Run("files", func(t *testing.T) {
		text := "mcp-" + sbx.Name + ".txt"
		// Missing directories are made, as mkdir -p would.
		must[any](t, s, "write_file", map[string]any{"sandbox": sbx.Name, "path": "made/by/write/" + text, "content": "x"})
		if got, err := os.ReadFile(filepath.Join(workspace, "made/by/write", text)); err != nil || string(got) != "x" {
			t.Errorf("write_file into missing directories: %q %v", got, err)
		}
		if _, toolErr := call[any](t, s, "write_file", map[string]any{"sandbox": sbx.Name, "path": "made/by/write/" + text + "/below", "content": "x"}); !strings.Contains(toolErr, "not a directory") {
			t.Errorf("write_file below a file: %q", toolErr)
		}
		must[any](t, s, "write_file", map[string]any{"sandbox": sbx.Name, "path": "mcp/" + text, "content": "hello\n"})
		read := must[struct{ Content, Encoding string }](t, s, "read_file", map[string]any{"sandbox": sbx.Name, "path": "mcp/" + text})
		if read.Content != "hello\n" || read.Encoding != "text" {
			t.Errorf("read_file text: %+v", read)
		}
		binary := []byte{0, 1, 0xfe, 0xff}
		must[any](t, s, "write_file", map[string]any{"sandbox": sbx.Name, "path": "mcp/" + text + ".bin",
			"content": base64.StdEncoding.EncodeToString(binary), "encoding": "base64"})
		// Not UTF-8: returned as base64 although text was asked for.
		read = must[struct{ Content, Encoding string }](t, s, "read_file", map[string]any{"sandbox": sbx.Name, "path": "mcp/" + text + ".bin"})
		if got, _ := base64.StdEncoding.DecodeString(read.Content); read.Encoding != "base64" || string(got) != string(binary) {
			t.Errorf("read_file binary: %+v", read)
		}
		entries := must[struct {
			Entries []struct{ Name, Type string } `json:"entries"`
		}](t, s, "list_files", map[string]any{"sandbox": sbx.Name, "path": "mcp"})
		if !slices.ContainsFunc(entries.Entries, func(e struct{ Name, Type string }) bool { return e.Name == text && e.Type == "file" }) {
			t.Errorf("list_files: %+v", entries.Entries)
		}
		if _, toolErr := call[any](t, s, "read_file", map[string]any{"sandbox": sbx.Name, "path": "../../etc/passwd"}); !strings.Contains(toolErr, "leaves the workspace") {
			t.Errorf("read_file outside the workspace: %q", toolErr)
		}
	})

	t.Run("commands", func(t *testing.T) {
		res := must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
		if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.TimedOut {
			t.Errorf("exit, stdout, stderr: %+v", res)
		}
		res = must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sh", "-c", "echo out; kill -TERM $$"}})
		if res.ExitCode != 128+15 || res.Signal != "TERM" || res.Stdout != "out\n" {
			t.Errorf("a command killed by SIGTERM: %+v; want exit code 143 and signal TERM", res)
		}
		res = must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"head", "-c", "5"}, "stdin": "abcdefgh"})
		if res.ExitCode != 0 || res.Stdout != "abcde" {
			t.Errorf("stdin: %+v", res)
		}
		// The file written above is found relative to the workdir.
		res = must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"test", "-f", "mcp-" + sbx.Name + ".txt"}, "workdir": filepath.Join(workspace, "mcp")})
		if res.ExitCode != 0 {
			t.Errorf("workdir: %+v", res)
		}
		// A relative workdir starts at the workspace, as the file tools do.
		res = must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"test", "-f", "mcp-" + sbx.Name + ".txt"}, "workdir": "mcp"})
		if res.ExitCode != 0 {
			t.Errorf("relative workdir mcp: %+v", res)
		}
		// OutputLimit 16: the rest is counted, not returned.
		res = must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sh", "-c", "head -c 100 /dev/zero | tr '\\0' x"}})
		if res.Stdout != strings.Repeat("x", 16) || res.StdoutDropped != 84 {
			t.Errorf("capped output: %+v", res)
		}
		// Output that is not UTF-8 comes as base64, as read_file's does.
		res = must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sh", "-c", `printf '\377\376'; echo text >&2`}})
		if res.Stdout != "//4=" || res.StdoutEncoding != "base64" || res.Stderr != "text\n" || res.StderrEncoding != "" {
			t.Errorf("binary stdout: %+v", res)
		}
		res = must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"echo", "hi"}, "output_encoding": "base64"})
		if res.Stdout != "aGkK" || res.StdoutEncoding != "base64" {
			t.Errorf("base64 asked for: %+v", res)
		}
		if _, toolErr := call[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"true"}, "output_encoding": "hex"}); !strings.Contains(toolErr, `output_encoding: encoding "hex": use text or base64`) {
			t.Errorf("an unknown output encoding: %q", toolErr)
		}
		res = must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sleep", "30"}, "timeout_seconds": 1})
		if !res.TimedOut || res.ExitCode != -1 || !strings.Contains(res.Note, "may still be running") {
			t.Errorf("timeout: %+v", res)
		}
	})

	t.Run("bob is refused with the API server's words", func(t *testing.T) {
		bobs := connect(t, bob, mcpserver.Options{})
		_, toolErr := call[mcpserver.CommandResult](t, bobs, "run_command", map[string]any{"sandbox": sbx.Name, "command": []string{"true"}})
		for _, part := range []string{"user " + bob.Name, "may not exec in sandbox " + sbx.Name, "not its owner (" + alice.Name + ")"} {
			if !strings.Contains(toolErr, part) {
				t.Errorf("bob's run_command: %q does not say %q", toolErr, part)
			}
		}
		if _, toolErr := call[any](t, bobs, "delete_sandbox", map[string]any{"sandbox": sbx.Name}); !strings.Contains(toolErr, "not its owner") {
			t.Errorf("bob's delete_sandbox: %q", toolErr)
		}
	})

	t.Run("stop, start, delete", func(t *testing.T) {
		if got := must[mcpserver.Sandbox](t, s, "stop_sandbox", map[string]any{"sandbox": sbx.Name}); got.Phase != string(v1.SandboxPhaseStopped) {
			t.Errorf("stop_sandbox: %+v", got)
		}
		if got := must[mcpserver.Sandbox](t, s, "start_sandbox", map[string]any{"sandbox": sbx.Name}); !got.Ready {
			t.Errorf("start_sandbox: %+v", got)
		}
		must[any](t, s, "delete_sandbox", map[string]any{"sandbox": sbx.Name})
		cluster.SandboxGone(t, sbx.Name)
	})

	t.Run("run_once leaves nothing behind", func(t *testing.T) {
		script := "once-" + sbx.Name + ".sh"
		for _, tc := range []struct {
			name    string
			command []string
			timeout int
			check   func(mcpserver.CommandResult) bool
		}{
			{"success", []string{"sh", script}, 0, func(r mcpserver.CommandResult) bool { return r.ExitCode == 0 && r.Stdout == "from a file\n" }},
			{"failure", []string{"sh", "-c", "exit 7"}, 0, func(r mcpserver.CommandResult) bool { return r.ExitCode == 7 && !r.TimedOut }},
			{"timeout", []string{"sleep", "30"}, 1, func(r mcpserver.CommandResult) bool { return r.TimedOut }},
		} {
			args := map[string]any{"template": tpl.Name, "command": tc.command, "workdir": workspace,
				"files": []map[string]any{{"path": script, "content": "echo from a file\n"}}}
			if tc.timeout > 0 {
				args["timeout_seconds"] = tc.timeout
			}
			out := must[struct {
				Sandbox string `json:"sandbox"`
				mcpserver.CommandResult
			}](t, s, "run_once", args)
			if !tc.check(out.CommandResult) {
				t.Errorf("run_once %s: %+v", tc.name, out)
			}
			cluster.SandboxGone(t, out.Sandbox)
		}
		if _, toolErr := call[any](t, s, "run_once", map[string]any{"template": "no-such-template", "command": []string{"true"}}); !strings.Contains(toolErr, "template no-such-template not found") {
			t.Errorf("run_once from a missing template: %q", toolErr)
		}
		left := &v1.SandboxList{}
		if err := cluster.Client.List(context.Background(), left); err != nil {
			t.Fatal(err)
		}
		for _, x := range left.Items {
			if x.Spec.Owner == alice.Name {
				t.Errorf("sandbox %s of alice is left after the run_once calls", x.Name)
			}
		}
	})
}

// TestRunCommandWakesAnIdleSandbox: a command through the tools wakes a
// sandbox stopped for idleness, and runs.
func TestRunCommandWakesAnIdleSandbox(t *testing.T) {
	cluster := testcluster.Get(t)
	tpl, _ := cluster.IdleTemplate(t, 3*time.Second)
	s := connect(t, cluster.Developers(t, "alice")[0], mcpserver.Options{})
	sbx := create(t, s, tpl.Name)
	cluster.WaitIdleStopped(t, sbx.Name)
	out := must[mcpserver.CommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name, "command": []string{"echo", "mcp"}})
	if out.ExitCode != 0 || out.Stdout != "mcp\n" {
		t.Errorf("run_command in an idle-stopped sandbox: %+v", out)
	}
}

// create creates a sandbox from the template with create_sandbox, deleted
// when the test ends.
func create(t *testing.T, s *mcp.ClientSession, template string) mcpserver.Sandbox {
	t.Helper()
	sbx := must[mcpserver.Sandbox](t, s, "create_sandbox", map[string]any{"template": template})
	t.Cleanup(func() {
		_ = testcluster.Get(t).Client.Delete(context.Background(), &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: sbx.Name}})
	})
	return sbx
}
