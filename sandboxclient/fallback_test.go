package sandboxclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestSPDYFallback puts a proxy that refuses WebSocket upgrades, as some
// proxies do, between the client and the API server: exec and port-forward
// fall back to SPDY and still work.
func TestSPDYFallback(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	dev := cluster.Developers(t, "alice")[0]
	tpl, _ := newTemplate(t)

	// The proxy authenticates to the API server as admin and passes the
	// developer's impersonation headers on, so the API server still sees
	// the developer.
	upstream, err := url.Parse(cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	// HTTP/1.1 to the API server: upgrades do not exist in HTTP/2.
	admin := rest.CopyConfig(cluster.Config)
	admin.NextProtos = []string{"http/1.1"}
	transport, err := rest.TransportFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.Transport = transport
	var mu sync.Mutex
	var spdy []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.ToLower(r.Header.Get("Upgrade")) {
		case "websocket":
			http.Error(w, "this proxy does not pass WebSockets", http.StatusBadRequest)
			return
		case "spdy/3.1":
			mu.Lock()
			spdy = append(spdy, r.Method+" "+r.URL.Path)
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	cfg := &rest.Config{Host: server.URL, Impersonate: dev.Config.Impersonate}
	alice, err := sandboxclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sbx := claim(t, user{name: dev.Name, client: alice}, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx := context.Background()

	var stdout, stderr bytes.Buffer
	code, err := alice.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{
		Command: []string{"sh", "-c", "echo out; echo err >&2; exit 5"}, Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil || code != 5 || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("exec over SPDY: code %d, err %v, stdout %q, stderr %q", code, err, stdout.String(), stderr.String())
	}

	pfCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan uint16, 1)
	done := make(chan error, 1)
	go func() {
		done <- alice.PortForward(pfCtx, sbx.Name, sandboxclient.PortForwardOptions{
			Ports: []string{"0:7"}, Ready: func(p []portforward.ForwardedPort) { ready <- p[0].Local },
		})
	}()
	select {
	case err := <-done:
		t.Fatalf("port-forward ended: %v", err)
	case port := <-ready:
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.WriteString(conn, "over spdy\n")
		got := make([]byte, len("over spdy\n"))
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != "over spdy\n" {
			t.Errorf("port-forward over SPDY: %q %v", got, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("port-forward never listened")
	}

	mu.Lock()
	defer mu.Unlock()
	var exec, forward bool
	for _, req := range spdy {
		exec = exec || strings.HasSuffix(req, "/exec")
		forward = forward || strings.HasSuffix(req, "/portforward")
	}
	if !exec || !forward {
		t.Errorf("SPDY requests through the proxy: %v, want exec and portforward", spdy)
	}
}

// TestPlainExecIsToldOnce: a sandbox whose pod has no agent (this
// package's reconciler runs without an egress gate image, which carries
// it) works through plain exec, and the client says so once per pod on
// Notices; Session says why there is none.
func TestPlainExecIsToldOnce(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, _ := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	var notices bytes.Buffer
	alice.client.Notices = &notices
	ctx := context.Background()
	for range 2 {
		if code, err := alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"true"}}); err != nil || code != 0 {
			t.Fatalf("exec: %d %v", code, err)
		}
	}
	_, err := alice.client.Session(ctx, sbx.Name)
	if !errors.Is(err, sandboxclient.ErrNoAgent) || !strings.Contains(err.Error(), sbx.Name) {
		t.Errorf("Session of a pod without the agent: %v; want ErrNoAgent naming the sandbox", err)
	}
	if lines := strings.Split(strings.TrimSpace(notices.String()), "\n"); len(lines) != 1 ||
		!strings.Contains(lines[0], sbx.Name) || !strings.Contains(lines[0], "plain exec") {
		t.Errorf("notices %q; want one line naming the sandbox and plain exec", notices.String())
	}
}
