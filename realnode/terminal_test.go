package realnode_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sshproxy"
)

// sshTo serves the SSH proxy for the sandbox in-process and returns a
// client connected to it, as OpenSSH is through its ProxyCommand.
func (e env) sshTo(t *testing.T, name string) *ssh.Client {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// A loopback connection, not net.Pipe: both sides of an SSH handshake
	// write before they read, which an unbuffered pipe deadlocks on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	clientSide, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	serverSide, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	server := &sshproxy.Server{Client: e.sdk, Sandbox: name, HostKey: signer, Version: "test"}
	served := make(chan error, 1)
	go func() { served <- server.Serve(ctx, serverSide) }()
	conn, chans, reqs, err := ssh.NewClientConn(clientSide, name+".sandbox", &ssh.ClientConfig{
		User: "test", HostKeyCallback: ssh.FixedHostKey(signer.PublicKey()), Timeout: time.Minute,
	})
	if err != nil {
		cancel()
		t.Fatalf("SSH to %s: %v (server: %v)", name, err, <-served)
	}
	c := ssh.NewClient(conn, chans, reqs)
	t.Cleanup(func() {
		_ = c.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("SSH server for %s: %v", name, err)
		}
	})
	return c
}

// checkTerminal: over SSH with a terminal (ssh -tt), the output a command
// writes just before it exits arrives every time, with its exit status;
// and a command that kills itself reports 128+9, as the node's runtime
// says it.
func (e env) checkTerminal(t *testing.T, sbx started) {
	c := e.sshTo(t, sbx.Name)
	for i := range 20 {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RequestPty("xterm", 24, 80, ssh.TerminalModes{}); err != nil {
			t.Fatal(err)
		}
		last := fmt.Sprintf("last-words-%d", i)
		out, err := s.Output("printf " + last + "; exit 5")
		var exit *ssh.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 5 || !strings.Contains(string(out), last) {
			t.Errorf("with a terminal, run %d: output %q, %v; want %q and exit status 5", i, out, err, last)
		}
	}
	code, err := e.sdk.Exec(context.Background(), sbx.Name, sandboxclient.ExecOptions{
		Command: []string{"sh", "-c", "kill -KILL $$"}, Timeout: time.Minute,
	})
	if _, killed := errors.AsType[*sandboxclient.KilledError](err); code != 137 || (err != nil && !killed) {
		t.Errorf("a command killed by SIGKILL: exit %d, %v; want 137", code, err)
	}
}
