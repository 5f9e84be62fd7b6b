package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/mcpserver"
)

// mcpSession starts `agentsandbox mcp` as the developer, over stdio, and
// connects the go-sdk's own client to it, as a coding agent would.
func mcpSession(t *testing.T, dev testcluster.Developer, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := command(t, dev, append([]string{"mcp"}, args...)...)
	c := mcp.NewClient(&mcp.Implementation{Name: "agentsandbox-test", Version: "v0"}, nil)
	session, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to agentsandbox mcp: %v", err)
	}
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// call calls a tool and decodes its structured result into Out. A tool
// error is returned as its text, the result is then zero.
func call[Out any](t *testing.T, s *mcp.ClientSession, tool string, args any) (out Out, toolError string) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if text, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, text.Text)
			}
		}
		return out, strings.Join(texts, "\n")
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: result %s: %v", tool, raw, err)
	}
	return out, ""
}

// must is call for a tool that has to succeed.
func must[Out any](t *testing.T, s *mcp.ClientSession, tool string, args any) Out {
	t.Helper()
	out, toolErr := call[Out](t, s, tool, args)
	if toolErr != "" {
		t.Fatalf("%s(%v): %s", tool, args, toolErr)
	}
	return out
}

type mcpCommandResult = mcpserver.CommandResult

// TestMCP drives the real binary over stdio with the go-sdk's client: the
// tools and their schemas, a sandbox's whole life, run_once leaving nothing
// behind whether the command succeeds, fails or times out, and bob refused
// at alice's sandbox with the API server's words.
func TestMCP(t *testing.T) {
	devs, tpl, workspace := setup(t, "alice", "bob")
	alice, bob := devs[0], devs[1]
	s := mcpSession(t, alice, "--lifetime", "30m", "--output-limit", "16")

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
		t.Errorf("a lifetime above --lifetime: %q", toolErr)
	}
	sbx := must[mcpserver.Sandbox](t, s, "create_sandbox", map[string]any{"template": tpl.Name})
	t.Cleanup(func() { cli(t, alice, "", "delete", sbx.Name) })
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
		res := must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
		if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.TimedOut {
			t.Errorf("exit, stdout, stderr: %+v", res)
		}
		res = must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sh", "-c", "echo out; kill -TERM $$"}})
		if res.ExitCode != 128+15 || res.Signal != "TERM" || res.Stdout != "out\n" {
			t.Errorf("a command killed by SIGTERM: %+v; want exit code 143 and signal TERM", res)
		}
		res = must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"head", "-c", "5"}, "stdin": "abcdefgh"})
		if res.ExitCode != 0 || res.Stdout != "abcde" {
			t.Errorf("stdin: %+v", res)
		}
		// The file written above is found relative to the workdir.
		res = must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"test", "-f", "mcp-" + sbx.Name + ".txt"}, "workdir": filepath.Join(workspace, "mcp")})
		if res.ExitCode != 0 {
			t.Errorf("workdir: %+v", res)
		}
		// A relative workdir starts at the workspace, as the file tools do.
		res = must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"test", "-f", "mcp-" + sbx.Name + ".txt"}, "workdir": "mcp"})
		if res.ExitCode != 0 {
			t.Errorf("relative workdir mcp: %+v", res)
		}
		// --output-limit 16: the rest is counted, not returned.
		res = must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sh", "-c", "head -c 100 /dev/zero | tr '\\0' x"}})
		if res.Stdout != strings.Repeat("x", 16) || res.StdoutDropped != 84 {
			t.Errorf("capped output: %+v", res)
		}
		// Output that is not UTF-8 comes as base64, as read_file's does.
		res = must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sh", "-c", `printf '\377\376'; echo text >&2`}})
		if res.Stdout != "//4=" || res.StdoutEncoding != "base64" || res.Stderr != "text\n" || res.StderrEncoding != "" {
			t.Errorf("binary stdout: %+v", res)
		}
		res = must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"echo", "hi"}, "output_encoding": "base64"})
		if res.Stdout != "aGkK" || res.StdoutEncoding != "base64" {
			t.Errorf("base64 asked for: %+v", res)
		}
		if _, toolErr := call[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"true"}, "output_encoding": "hex"}); !strings.Contains(toolErr, `output_encoding: encoding "hex": use text or base64`) {
			t.Errorf("an unknown output encoding: %q", toolErr)
		}
		res = must[mcpCommandResult](t, s, "run_command", map[string]any{"sandbox": sbx.Name,
			"command": []string{"sleep", "30"}, "timeout_seconds": 1})
		if !res.TimedOut || res.ExitCode != -1 || !strings.Contains(res.Note, "may still be running") {
			t.Errorf("timeout: %+v", res)
		}
	})

	t.Run("bob is refused with the API server's words", func(t *testing.T) {
		bobs := mcpSession(t, bob)
		_, toolErr := call[mcpCommandResult](t, bobs, "run_command", map[string]any{"sandbox": sbx.Name, "command": []string{"true"}})
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
		sandboxGone(t, sbx.Name)
	})

	t.Run("run_once leaves nothing behind", func(t *testing.T) {
		script := "once-" + sbx.Name + ".sh"
		for _, tc := range []struct {
			name    string
			command []string
			timeout int
			check   func(mcpCommandResult) bool
		}{
			{"success", []string{"sh", script}, 0, func(r mcpCommandResult) bool { return r.ExitCode == 0 && r.Stdout == "from a file\n" }},
			{"failure", []string{"sh", "-c", "exit 7"}, 0, func(r mcpCommandResult) bool { return r.ExitCode == 7 && !r.TimedOut }},
			{"timeout", []string{"sleep", "30"}, 1, func(r mcpCommandResult) bool { return r.TimedOut }},
		} {
			args := map[string]any{"template": tpl.Name, "command": tc.command, "workdir": workspace,
				"files": []map[string]any{{"path": script, "content": "echo from a file\n"}}}
			if tc.timeout > 0 {
				args["timeout_seconds"] = tc.timeout
			}
			out := must[struct {
				Sandbox string `json:"sandbox"`
				mcpCommandResult
			}](t, s, "run_once", args)
			if !tc.check(out.mcpCommandResult) {
				t.Errorf("run_once %s: %+v", tc.name, out)
			}
			sandboxGone(t, out.Sandbox)
		}
		if _, toolErr := call[any](t, s, "run_once", map[string]any{"template": "no-such-template", "command": []string{"true"}}); !strings.Contains(toolErr, "template no-such-template not found") {
			t.Errorf("run_once from a missing template: %q", toolErr)
		}
		left := &v1.SandboxList{}
		if err := testcluster.Get(t).Client.List(context.Background(), left); err != nil {
			t.Fatal(err)
		}
		for _, x := range left.Items {
			if x.Spec.Owner == alice.Name {
				t.Errorf("sandbox %s of alice is left after the run_once calls", x.Name)
			}
		}
	})
}
