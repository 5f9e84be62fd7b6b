package gittest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ServeSSH serves the repository over SSH too, to clients authenticating
// with authorized, and returns its ssh:// URL and the known_hosts line of
// its host key. Only git-upload-pack (clone, fetch, ls-remote) is served.
func (s *Server) ServeSSH(authorized ssh.PublicKey) (url string, knownHostsLine string) {
	s.t.Helper()
	_, hostKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		s.t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(hostKey)
	if err != nil {
		s.t.Fatal(err)
	}
	config := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if string(key.Marshal()) == string(authorized.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("key not authorized")
	}}
	config.AddHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go s.serveSSHConn(conn, config)
		}
	}()
	addr := l.Addr().String()
	return "ssh://git@" + addr + "/repo.git", knownhosts.Line([]string{addr}, signer.PublicKey())
}

func (s *Server) serveSSHConn(conn net.Conn, config *ssh.ServerConfig) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, config)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go s.serveSession(ch, chReqs)
	}
}

// serveSession runs the git-upload-pack an exec request asks for, on the
// repository directory, with the channel as its stdin and stdout.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" || len(req.Payload) < 4 {
			_ = req.Reply(false, nil)
			continue
		}
		command := string(req.Payload[4:])
		prog, arg, _ := strings.Cut(command, " ")
		repo := strings.Trim(arg, "'\"/")
		if prog != "git-upload-pack" || repo != "repo.git" {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		cmd := exec.Command("git-upload-pack", filepath.Join(s.root, repo))
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		status := uint32(0)
		if err := cmd.Run(); err != nil {
			status = 1
		}
		payload := make([]byte, 4)
		binary.BigEndian.PutUint32(payload, status)
		_, _ = ch.SendRequest("exit-status", false, payload)
		return
	}
}

// ClientKey returns a new private key in OpenSSH PEM form, as a client's
// identity file holds it, and its public key, for ServeSSH.
func ClientKey(t testing.TB) ([]byte, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	public, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), public
}
