package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/mcpserver"
)

// TestMCPCommand proves that `agentsandbox mcp` serves mcpserver's tools
// (whose tests say what the tools do) with the caller's kubeconfig and its
// own flags: over stdio, a sandbox alice creates is hers and lives at most
// --lifetime; with --http, the go-sdk's client reaches the tools at the
// address printed, and a web page's request is refused.
func TestMCPCommand(t *testing.T) {
	devs, tpl, _ := setup(t, "alice")
	alice := devs[0]

	t.Run("stdio", func(t *testing.T) {
		s := mcpClient(t, &mcp.CommandTransport{Command: command(t, alice, "mcp", "--lifetime", "30m")})
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_sandbox", Arguments: map[string]any{"template": tpl.Name}})
		if err != nil || res.IsError {
			t.Fatalf("create_sandbox: %v %+v", err, res)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var sbx mcpserver.Sandbox
		if err := json.Unmarshal(raw, &sbx); err != nil {
			t.Fatalf("create_sandbox returned %s: %v", raw, err)
		}
		t.Cleanup(func() { cli(t, alice, "", "delete", sbx.Name) })
		expires, err := time.Parse(time.RFC3339, sbx.Expires)
		if !sbx.Ready || sbx.Owner != alice.Name || err != nil || time.Until(expires) > 30*time.Minute {
			t.Errorf("create_sandbox returned %+v; want a Ready sandbox of %s that expires within 30m", sbx, alice.Name)
		}
	})

	t.Run("http", func(t *testing.T) {
		addr := testcluster.FreeAddr(t)
		cmd := command(t, alice, "mcp", "--http", addr)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		serving := make(chan struct{})
		go func() {
			scanner := bufio.NewScanner(stderr)
			for scanner.Scan() {
				if scanner.Text() == "serving MCP at http://"+addr+"/mcp" {
					close(serving)
				}
			}
		}()
		select {
		case <-serving:
		case <-time.After(30 * time.Second):
			t.Fatal("agentsandbox mcp --http did not serve within 30 s")
		}
		url := "http://" + addr + "/mcp"
		s := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: url})
		if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_templates", Arguments: map[string]any{}}); err != nil {
			t.Errorf("list_templates over HTTP: %v", err)
		}
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", "http://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a request from another origin: %s; want 403 Forbidden", resp.Status)
		}
	})
}

// mcpClient connects the go-sdk's client, as a coding agent would, over
// transport.
func mcpClient(t *testing.T, transport mcp.Transport) *mcp.ClientSession {
	t.Helper()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "agentsandbox-test", Version: "v0"}, nil).Connect(context.Background(), transport, nil)
	if err != nil {
		t.Fatalf("connecting to agentsandbox mcp: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
