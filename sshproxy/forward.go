package sshproxy

import (
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/crypto/ssh"
)

// directTCPIP is the payload of a "direct-tcpip" channel request (RFC 4254
// section 7.2): where the client wants to connect, and from where.
type directTCPIP struct {
	Host       string
	Port       uint32
	OriginHost string
	OriginPort uint32
}

// forwardHosts are the destinations of `ssh -L` that mean the sandbox
// itself: port-forwarding reaches the pod's own ports and nothing else.
var forwardHosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}

// forward carries one `ssh -L` connection to a port of the sandbox's pod.
func (s *Server) forward(ctx context.Context, newChannel ssh.NewChannel) {
	var req directTCPIP
	if err := ssh.Unmarshal(newChannel.ExtraData(), &req); err != nil {
		_ = newChannel.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	if !forwardHosts[req.Host] {
		_ = newChannel.Reject(ssh.Prohibited, fmt.Sprintf(
			"only the sandbox's own ports can be forwarded: use localhost:PORT, not %s:%d", req.Host, req.Port))
		return
	}
	if req.Port == 0 || req.Port > 65535 {
		_ = newChannel.Reject(ssh.ConnectionFailed, fmt.Sprintf("invalid port %d", req.Port))
		return
	}
	remote, err := s.Client.DialPort(ctx, s.Sandbox, uint16(req.Port))
	if err != nil {
		_ = newChannel.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	defer func() { _ = remote.Close() }()
	ch, requests, err := newChannel.Accept()
	if err != nil {
		return
	}
	defer func() { _ = ch.Close() }()
	go ssh.DiscardRequests(requests)
	// The SSH connection ended (ssh -L was stopped): end the forwarded
	// connection with it.
	stop := context.AfterFunc(ctx, func() {
		_ = ch.Close()
		_ = remote.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(remote, ch)
	}()
	_, err = io.Copy(ch, remote)
	if err != nil && ctx.Err() == nil && s.Log != nil {
		// The channel is open already, and SSH has no way to say why it
		// closes: the node's reason goes to the proxy's stderr.
		_, _ = fmt.Fprintf(s.Log, "agentsandbox: forwarding to localhost:%d: %v\n", req.Port, err)
	}
	// The sandbox's side ended: end the client's side too, which ends the
	// copy above.
	_ = ch.Close()
	_ = remote.Close()
	wg.Wait()
}
