package webui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/coder/websocket"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session"
)

// The terminal's WebSocket carries the terminal's bytes as binary messages
// both ways, and control as JSON text messages: from the page
// {"resize":{"cols":C,"rows":R}}; from the server first
// {"session":"shell","resumed":BOOL} when the terminal is the sandbox
// agent's terminal session (which outlives the socket: a reload resumes
// it, its scrollback first), then {"exit":CODE} when the shell ends or
// {"error":MESSAGE} when it could not start (the API server's refusal for
// someone else's sandbox). Without the agent the shell is a plain exec and
// ends with the socket.

// control is a text message of the terminal protocol.
type control struct {
	Resize *struct {
		Cols uint16 `json:"cols"`
		Rows uint16 `json:"rows"`
	} `json:"resize,omitempty"`
	Session string `json:"session,omitempty"`
	Resumed bool   `json:"resumed,omitempty"`
	Exit    *int   `json:"exit,omitempty"`
	Error   string `json:"error,omitempty"`
}

// terminalReadLimit bounds one message from the page (a paste).
const terminalReadLimit = 1 << 20

// openTerminal bridges the WebSocket to a login shell with a TTY in the
// sandbox: the agent's terminal session sandboxclient.DefaultShell where
// the pod has the agent, else a plain exec. The API server decides whether
// the caller may exec into the sandbox: only its owner may.
func (s *Server) openTerminal(w http.ResponseWriter, r *http.Request) {
	// ServeHTTP checked Origin and the CSRF token; Accept checks Origin
	// against Host again, as every WebSocket server should.
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	conn.SetReadLimit(terminalReadLimit)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	stdin, stdinWriter := io.Pipe()
	sizes := sandboxclient.NewTerminalSizes()
	defer sizes.Close()
	go func() {
		defer func() { _ = stdinWriter.Close() }()
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				// The page closed the terminal: detach from the shell
				// (or, through plain exec, end it).
				cancel()
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := stdinWriter.Write(data); err != nil {
					return
				}
				continue
			}
			var msg control
			if json.Unmarshal(data, &msg) == nil && msg.Resize != nil {
				sizes.Push(uint32(msg.Resize.Cols), uint32(msg.Resize.Rows))
			}
		}
	}()

	name := r.PathValue("name")
	out := binaryWriter{ctx: ctx, conn: conn}
	var exit *int
	sess, err := s.sdk.Session(ctx, name)
	switch {
	case err == nil:
		defer s.sdk.InUse(name)()
		exit, err = resumeShell(ctx, sess, stdin, out, sizes, func(resumed bool) error {
			return sendControl(ctx, conn, control{Session: sandboxclient.DefaultShell, Resumed: resumed})
		})
	case errors.Is(err, sandboxclient.ErrNoAgent):
		var code int
		code, err = s.sdk.Exec(ctx, name, sandboxclient.ExecOptions{
			Command: []string{"env", "TERM=xterm-256color", "sh", "-c", sandboxclient.LoginShell},
			Stdin:   stdin, Stdout: out, TTY: true, Resize: sizes,
		})
		exit = &code
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return // the page went away; nobody to tell
	}
	end := control{Exit: exit}
	if err != nil {
		end = control{Error: err.Error()}
	}
	_ = sendControl(ctx, conn, end)
	_ = conn.Close(websocket.StatusNormalClosure, "")
}

// resumeShell attaches to the sandbox's default shell, starting it when it
// does not run; told hears whether it resumed one. The exit is nil when
// ctx ended first: the shell runs on.
func resumeShell(ctx context.Context, sess *sandboxclient.Session, stdin io.Reader, out io.Writer, sizes *sandboxclient.TerminalSizes, told func(resumed bool) error) (*int, error) {
	resumed, err := sess.Shell(ctx, sandboxclient.DefaultShell, nil)
	if err != nil {
		return nil, err
	}
	if err := told(resumed); err != nil {
		return nil, err
	}
	exit, err := sess.Attach(ctx, sandboxclient.DefaultShell, session.AttachOptions{
		Offset: -1, Stdin: stdin, Stdout: out, Resize: sandboxclient.Sizes(sizes),
	})
	if err != nil || exit == nil {
		return nil, err
	}
	return &exit.Code, nil
}

func sendControl(ctx context.Context, conn *websocket.Conn, msg control) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, data)
}

// binaryWriter sends what the shell writes as binary messages.
type binaryWriter struct {
	ctx  context.Context
	conn *websocket.Conn
}

func (b binaryWriter) Write(p []byte) (int, error) {
	if err := b.conn.Write(b.ctx, websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
