package sshproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"

	"golang.org/x/crypto/ssh"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// envName is a variable name a session may set (the "env" request, which
// OpenSSH sends for SendEnv and SetEnv; LANG and LC_* by default on
// Debian). Other names are refused, as sshd refuses names it does not
// accept.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// session is one "session" channel: at most one shell, command or
// subsystem, with the terminal and environment requested before it.
type session struct {
	server    *Server
	ch        ssh.Channel
	workspace string

	env   []string
	tty   bool
	sizes *sandboxclient.TerminalSizes

	started bool
	done    chan struct{}
}

// Request payloads (RFC 4254 section 6).
type (
	ptyRequest struct {
		Term                   string
		Columns, Rows          uint32
		WidthPixels, HeightPix uint32
		Modes                  string
	}
	windowChange struct {
		Columns, Rows          uint32
		WidthPixels, HeightPix uint32
	}
	envRequest  struct{ Name, Value string }
	execRequest struct{ Command string }
)

func (s *session) serve(ctx context.Context, requests <-chan *ssh.Request) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.done = make(chan struct{})
	s.sizes = sandboxclient.NewTerminalSizes()
	defer s.sizes.Close()
	for req := range requests {
		ok := s.handle(ctx, req)
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
	}
	// The client closed the channel: stop what still runs for it.
	cancel()
	if s.started {
		<-s.done
	}
}

// handle answers one request; false refuses it.
func (s *session) handle(ctx context.Context, req *ssh.Request) bool {
	switch req.Type {
	case "pty-req":
		var p ptyRequest
		if s.started || ssh.Unmarshal(req.Payload, &p) != nil {
			return false
		}
		s.tty = true
		if p.Term != "" {
			s.env = append(s.env, "TERM="+p.Term)
		}
		s.sizes.Push(p.Columns, p.Rows)
		return true
	case "window-change":
		var w windowChange
		if ssh.Unmarshal(req.Payload, &w) != nil {
			return false
		}
		s.sizes.Push(w.Columns, w.Rows)
		return true
	case "env":
		var e envRequest
		if s.started || ssh.Unmarshal(req.Payload, &e) != nil || !envName.MatchString(e.Name) {
			return false
		}
		s.env = append(s.env, e.Name+"="+e.Value)
		return true
	case "shell":
		return s.start(func() (int, *sandboxclient.KilledError) { return s.run(ctx, sandboxclient.LoginShell) })
	case "exec":
		var e execRequest
		if ssh.Unmarshal(req.Payload, &e) != nil {
			return false
		}
		return s.start(func() (int, *sandboxclient.KilledError) { return s.run(ctx, e.Command) })
	case "subsystem":
		var e execRequest
		if ssh.Unmarshal(req.Payload, &e) != nil || e.Command != "sftp" {
			return false
		}
		return s.start(func() (int, *sandboxclient.KilledError) { return s.serveSFTP(ctx), nil })
	}
	// signal, x11-req, auth-agent-req@openssh.com, break: not served.
	return false
}

// exitSignal is the payload of an "exit-signal" request (RFC 4254 section
// 6.10): the signal's name without SIG.
type exitSignal struct {
	Signal     string
	CoreDumped bool
	Message    string
	Language   string
}

// start runs work once per session; when it ends, its exit status (or the
// signal that killed it) is sent and the channel closed. A negative status
// sends none, which the client reports as a failed session (ssh exits 255).
func (s *session) start(work func() (int, *sandboxclient.KilledError)) bool {
	if s.started {
		return false
	}
	s.started = true
	go func() {
		defer close(s.done)
		code, killed := work()
		_ = s.ch.CloseWrite()
		switch {
		case killed != nil:
			// As sshd: ssh then exits 255 and reports the signal.
			_, _ = s.ch.SendRequest("exit-signal", false, ssh.Marshal(exitSignal{Signal: killed.Signal}))
		case code >= 0:
			_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
		}
		_ = s.ch.Close()
	}()
	return true
}

// run runs command with sh -c in the sandbox, as sshd runs it with the
// user's shell, with the session's environment and terminal, and returns
// its exit code, or the signal that killed it.
func (s *session) run(ctx context.Context, command string) (int, *sandboxclient.KilledError) {
	argv := append([]string{"env"}, s.env...)
	argv = append(argv, "sh", "-c", command)
	opts := sandboxclient.ExecOptions{Command: argv, Stdin: s.ch, Stdout: s.ch, Stderr: s.ch.Stderr(), TTY: s.tty}
	if s.tty {
		ended := make(chan struct{})
		defer close(ended)
		opts.Stdin = terminalInput{r: s.ch, ended: ended}
		opts.Stderr, opts.Resize = nil, s.sizes
	}
	code, err := s.server.Client.Exec(ctx, s.server.Sandbox, opts)
	if killed, ok := errors.AsType[*sandboxclient.KilledError](err); ok {
		return code, killed
	}
	if err != nil {
		s.fail(err)
		return -1, nil
	}
	return code, nil
}

// terminalInput is the client's input to a command on a terminal, which
// has no end of input: the client's EOF (ssh -tt with stdin a file) is held
// until the command ends. Passed on, it would close the exec's terminal, and
// the node's runtime would drop what the command wrote last and had not
// been read yet (on runc, nearly every time). sshd does not pass it on
// either: on a terminal, end of input is ^D.
type terminalInput struct {
	r     io.Reader
	ended <-chan struct{}
}

func (t terminalInput) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if errors.Is(err, io.EOF) {
		if n > 0 {
			return n, nil
		}
		<-t.ended
	}
	return n, err
}

// fail reports why the session could not run to the client's stderr (its
// terminal when it has one, which needs a carriage return).
func (s *session) fail(err error) {
	msg := fmt.Sprintf("agentsandbox: %v\n", err)
	var w io.Writer = s.ch.Stderr()
	if s.tty {
		msg = fmt.Sprintf("agentsandbox: %v\r\n", err)
		w = s.ch
	}
	_, _ = io.WriteString(w, msg)
}
