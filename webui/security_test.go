package webui_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// TestCrossSiteRequestsAreRefused: a state-changing request acts only with
// the page's CSRF token and from the page's own origin, and the server
// answers only to its own host names (no DNS rebinding).
func TestCrossSiteRequestsAreRefused(t *testing.T) {
	t.Parallel()
	alice := cluster(t).Developers(t, "alice")[0]
	base := serve(t, alice.Config)
	host := strings.TrimPrefix(base, "http://")

	page, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	_ = page.Body.Close()
	for header, want := range map[string]string{
		"Content-Security-Policy": "script-src 'self';",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := page.Header.Get(header); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to contain %q", header, got, want)
		}
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAll(body, -1) {
		if !strings.Contains(string(tag), " src=") {
			t.Errorf("inline script %s: the Content-Security-Policy forbids it", tag)
		}
	}
	if handler := regexp.MustCompile(`\son[a-z]+=`).Find(body); handler != nil {
		t.Errorf("inline event handler %q: the Content-Security-Policy forbids it", handler)
	}
	token := csrfToken(t, body)

	stop := func(origin, csrf, hostHeader string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/api/sandboxes/nobodys/stop", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		if hostHeader != "" {
			req.Host = hostHeader
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		data, _ := io.ReadAll(resp.Body)
		var answer struct{ Error string }
		_ = json.Unmarshal(data, &answer)
		if answer.Error == "" {
			answer.Error = string(data)
		}
		return resp.StatusCode, answer.Error
	}
	for name, tc := range map[string]struct {
		origin, csrf, host string
		code               int
		says               string
	}{
		"no Origin":              {csrf: token, code: http.StatusForbidden, says: "no Origin header"},
		"another site's Origin":  {origin: "http://evil.example", csrf: token, code: http.StatusForbidden, says: "http://evil.example may not act here"},
		"no CSRF token":          {origin: base, code: http.StatusForbidden, says: "CSRF token"},
		"a wrong CSRF token":     {origin: base, csrf: strings.Repeat("0", 64), code: http.StatusForbidden, says: "CSRF token"},
		"a rebound host name":    {origin: "http://evil.example:80", csrf: token, host: "evil.example:80", code: http.StatusMisdirectedRequest, says: "answers only to"},
		"the page's own request": {origin: base, csrf: token, code: http.StatusNotFound, says: "sandbox nobodys not found"},
	} {
		code, says := stop(tc.origin, tc.csrf, tc.host)
		if code != tc.code || !strings.Contains(says, tc.says) {
			t.Errorf("%s: %d %q, want %d and %q", name, code, says, tc.code, tc.says)
		}
	}

	// The terminal's WebSocket: only from the page's origin, with the token.
	for name, tc := range map[string]struct{ origin, query string }{
		"another site's Origin": {origin: "http://evil.example", query: "?csrf=" + token},
		"no CSRF token":         {origin: base},
	} {
		header := http.Header{"Origin": {tc.origin}}
		conn, resp, err := websocket.Dial(context.Background(), "ws://"+host+"/api/sandboxes/nobodys/terminal"+tc.query,
			&websocket.DialOptions{HTTPHeader: header})
		if err == nil {
			_ = conn.CloseNow()
			t.Errorf("terminal with %s: connected", name)
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("terminal with %s: %v, want 403", name, err)
		}
	}
	conn, _, err := websocket.Dial(context.Background(), "ws://"+host+"/api/sandboxes/nobodys/terminal?csrf="+token,
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {base}}})
	if err != nil {
		t.Fatalf("terminal from the page's origin with the token: %v", err)
	}
	defer func() { _ = conn.CloseNow() }()
	_, msg, err := conn.Read(context.Background())
	if err != nil || !strings.Contains(string(msg), `"error":"sandbox nobodys not found"`) {
		t.Errorf("terminal for a missing sandbox: %s, %v; want its error", msg, err)
	}
}

// csrfToken is the CSRF token of the page body.
func csrfToken(t *testing.T, body []byte) string {
	t.Helper()
	match := regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]{64})">`).FindSubmatch(body)
	if match == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return string(match[1])
}
