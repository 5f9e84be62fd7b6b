// Package sshproxy speaks the SSH protocol on one connection — OpenSSH's
// ProxyCommand pipe — and carries each channel to one sandbox through the
// Kubernetes API with the caller's own credentials: sessions become exec
// calls, the sftp subsystem is served here on top of the file operations,
// and local forwarding (-L) becomes port-forwarding. Nothing runs in the
// sandbox for it (no sshd, no keys stored in the cluster): RBAC and the
// admission policies decide exactly as they do for kubectl.
//
// The connection is the user's own pipe from their own ssh client, so the
// server accepts the client without authentication: who acts is decided by
// the kubeconfig, not by SSH. The host key only lets the client tell this
// proxy from anything else answering on the pipe.
package sshproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// Server serves one SSH connection for one sandbox.
type Server struct {
	Client  *sandboxclient.Client
	Sandbox string
	HostKey ssh.Signer
	// Version is the proxy's version, shown in its SSH identification.
	Version string
	// Log receives what the client has no place for on the connection: why
	// a forwarded connection ended (the port refused it, say). OpenSSH
	// shows a ProxyCommand's stderr to its user, as kubectl port-forward
	// prints these on its own.
	Log io.Writer
}

// Serve checks that the caller can reach the sandbox, then runs the SSH
// server on conn until the client disconnects or ctx ends. A sandbox the
// caller may not use fails here, before the handshake, with the API
// server's reason: the ssh client shows the error and exits non-zero
// instead of opening a session that cannot work.
func (s *Server) Serve(ctx context.Context, conn net.Conn) error {
	workspace, err := s.Client.Workspace(ctx, s.Sandbox)
	if err != nil {
		return err
	}
	config := &ssh.ServerConfig{NoClientAuth: true, ServerVersion: "SSH-2.0-agentsandbox_" + s.Version}
	config.AddHostKey(s.HostKey)
	sshConn, channels, requests, err := ssh.NewServerConn(conn, config)
	if err != nil {
		return fmt.Errorf("SSH handshake: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		_ = sshConn.Close()
	}()
	// Global requests are remote forwarding (-R) and keep-alives: neither
	// is served, and a refusal is what a keep-alive expects.
	go ssh.DiscardRequests(requests)
	var wg sync.WaitGroup
	for newChannel := range channels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handleChannel(ctx, newChannel, workspace)
		}()
	}
	// The client disconnected (how, it reports itself): what each channel
	// did went to the client on the channel.
	cancel()
	wg.Wait()
	return nil
}

func (s *Server) handleChannel(ctx context.Context, newChannel ssh.NewChannel, workspace string) {
	switch newChannel.ChannelType() {
	case "session":
		ch, requests, err := newChannel.Accept()
		if err != nil {
			return
		}
		sess := &session{server: s, ch: ch, workspace: workspace}
		sess.serve(ctx, requests)
	case "direct-tcpip":
		s.forward(ctx, newChannel)
	default:
		_ = newChannel.Reject(ssh.UnknownChannelType, fmt.Sprintf(
			"agentsandbox ssh-proxy serves sessions (shell, commands, sftp) and local forwarding (-L) only, not %q channels",
			newChannel.ChannelType()))
	}
}
