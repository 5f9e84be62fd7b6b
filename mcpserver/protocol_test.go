package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/mcpserver"
)

// initializeLine is an MCP initialize request with id 1.
const initializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// TestStdioSurvivesMalformedLines writes, as raw lines on the server's
// stdin, what an agent may send by mistake (not JSON, not JSON-RPC,
// JSON-RPC 1.0, an object id, a batch) before and after an initialize:
// each gets its JSON-RPC error, and the session still answers. No tool is
// called: the server needs no cluster.
func TestStdioSurvivesMalformedLines(t *testing.T) {
	serverIn, stdin := io.Pipe()
	stdout, serverOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- mcpserver.New(nil, nil, mcpserver.Options{}).Run(context.Background(), mcpserver.StdioTransport(serverIn, serverOut))
	}()
	answers := make(chan string)
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(nil, 1<<20)
		for scanner.Scan() {
			answers <- scanner.Text()
		}
		close(answers)
	}()
	// The agent closes stdin: the session ends without an error, and with
	// it stdout.
	t.Cleanup(func() {
		_ = stdin.Close()
		for range answers {
		}
		if err := <-served; err != nil {
			t.Errorf("the server ended with %v", err)
		}
	})
	next := func(after string) map[string]any {
		t.Helper()
		select {
		case line, ok := <-answers:
			if !ok {
				t.Fatalf("the server ended after %s", after)
			}
			var msg map[string]any
			if err := json.Unmarshal([]byte(line), &msg); err != nil {
				t.Fatalf("answer to %s is not JSON: %q", after, line)
			}
			return msg
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to %s in 10 s", after)
			return nil
		}
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("write %s: %v (the server ended)", line, err)
		}
	}
	bad := []struct {
		line string
		code float64
	}{
		{"this is not JSON", -32700},
		{`{"hello":"world"}`, -32600},
		{`{"jsonrpc":"1.0","id":2,"method":"ping"}`, -32600},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, -32600},
		{`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`, -32600},
	}
	check := func(when string) {
		t.Helper()
		for _, b := range bad {
			send(b.line)
			got := next(b.line)
			errObj, _ := got["error"].(map[string]any)
			if errObj == nil || errObj["code"] != b.code {
				t.Errorf("%s, %s was answered %v; want error %v", when, b.line, got, b.code)
			}
		}
	}
	check("before initialize")
	send(initializeLine)
	if got := next("initialize"); got["result"] == nil {
		t.Fatalf("initialize after the malformed lines: %v", got)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	check("in the session")
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	got := next("tools/list")
	result, _ := got["result"].(map[string]any)
	if tools, _ := result["tools"].([]any); len(tools) == 0 {
		t.Errorf("tools/list after the malformed lines: %v", got)
	}
}

// TestHTTPRefusesOtherOrigins: a request a browser sends from another
// origin (or from an opaque one, Origin: null) is refused 403 whatever its
// method; an agent's request (no Origin) and one from the server's own
// origin are served. No tool is called: the server needs no cluster.
func TestHTTPRefusesOtherOrigins(t *testing.T) {
	srv := httptest.NewServer(mcpserver.HTTPHandler(mcpserver.New(nil, nil, mcpserver.Options{})))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	url := srv.URL + "/mcp"
	for _, tc := range []struct {
		method, origin string
		want           int
	}{
		{http.MethodPost, "", http.StatusOK},
		{http.MethodPost, "http://" + addr, http.StatusOK},
		{http.MethodPost, "http://evil.example", http.StatusForbidden},
		{http.MethodPost, "null", http.StatusForbidden},
		{http.MethodGet, "http://evil.example", http.StatusForbidden},
		{http.MethodDelete, "http://evil.example", http.StatusForbidden},
	} {
		req, err := http.NewRequest(tc.method, url, strings.NewReader(initializeLine))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		what := fmt.Sprintf("%s with Origin %q", tc.method, tc.origin)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s; want %d", what, resp.StatusCode, strings.TrimSpace(string(body)), tc.want)
		}
		if tc.want == http.StatusForbidden && !strings.Contains(string(body), "is not this server's") {
			t.Errorf("%s: refused with %q, which does not say why", what, body)
		}
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			endSession(t, url, id)
		}
	}
}

// endSession ends the MCP session id at url, as an agent done with the
// server does: the handler keeps a session until then.
func endSession(t *testing.T, url, id string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Errorf("ending session %s: %s", id, resp.Status)
	}
}
