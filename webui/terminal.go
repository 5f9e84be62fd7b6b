package webui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/coder/websocket"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// The terminal's WebSocket carries the terminal's bytes as binary messages
// both ways, and control as JSON text messages: from the page
// {"resize":{"cols":C,"rows":R}}, from the server {"exit":CODE} when the
// shell ends or {"error":MESSAGE} when it could not start (the API server's
// refusal for someone else's sandbox).

// control is a text message of the terminal protocol.
type control struct {
	Resize *struct {
		Cols uint16 `json:"cols"`
		Rows uint16 `json:"rows"`
	} `json:"resize,omitempty"`
	Exit  *int   `json:"exit,omitempty"`
	Error string `json:"error,omitempty"`
}

// terminalReadLimit bounds one message from the page (a paste).
const terminalReadLimit = 1 << 20

// openTerminal runs a login shell with a TTY in the sandbox and bridges it
// to the WebSocket. The API server decides whether the caller may exec into
// the sandbox: only its owner may.
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
				// The page closed the terminal: end the shell's session.
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

	code, err := s.sdk.Exec(ctx, r.PathValue("name"), sandboxclient.ExecOptions{
		Command: []string{"env", "TERM=xterm-256color", "sh", "-c", sandboxclient.LoginShell},
		Stdin:   stdin, Stdout: binaryWriter{ctx: ctx, conn: conn}, TTY: true, Resize: sizes,
	})
	end := control{Exit: &code}
	if err != nil {
		end = control{Error: err.Error()}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return // the page went away; nobody to tell
	}
	data, _ := json.Marshal(end)
	_ = conn.Write(ctx, websocket.MessageText, data)
	_ = conn.Close(websocket.StatusNormalClosure, "")
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
