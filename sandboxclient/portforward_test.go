package sandboxclient_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/portforward"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestPortForwardCarriesTraffic forwards a local port to the sandbox's port
// 7, which the local cluster's node echoes, and sends data both ways.
func TestPortForwardCarriesTraffic(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, _ := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan uint16, 1)
	done := make(chan error, 1)
	go func() {
		done <- alice.client.PortForward(ctx, sbx.Name, sandboxclient.PortForwardOptions{
			Ports: []string{"0:7"},
			Ready: func(ports []portforward.ForwardedPort) { ready <- ports[0].Local },
		})
	}()
	var port uint16
	select {
	case port = <-ready:
	case err := <-done:
		t.Fatalf("port-forward ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("port-forward never listened")
	}
	for i := range 2 { // two connections over one forward
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		msg := strings.Repeat(fmt.Sprintf("ping %d ", i), 10000) + "\n"
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != msg {
			t.Errorf("connection %d: %d bytes back, %v", i, len(got), err)
		}
		_ = conn.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("port-forward after cancel: %v", err)
	}
}
