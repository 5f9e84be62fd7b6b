package realnode_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentsandbox/terraform-provider-agentsandbox/webui"
)

// checkPageTerminal opens the page's terminal twice, as a reload does:
// the second socket resumes the same shell, its scrollback first, and the
// shell's exit reaches the page.
func (e env) checkPageTerminal(t *testing.T, sbx started) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := webui.New(e.cluster.Config, webui.Options{Context: "realnode", Server: e.cluster.Config.Host})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, l) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	base := "http://" + l.Addr().String()
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	token := regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]{64})">`).FindSubmatch(page)
	if token == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	open := func() *pageTerminal {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/sandboxes/"+sbx.Name+"/terminal?csrf="+string(token[1]),
			&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {base}}})
		if err != nil {
			t.Fatalf("the page's terminal: %v", err)
		}
		conn.SetReadLimit(4 << 20)
		return &pageTerminal{t: t, ctx: ctx, conn: conn}
	}

	first := open()
	hello := first.control()
	if hello.Session != "shell" {
		t.Fatalf("the terminal's first message: %+v, want the agent's session \"shell\"", hello)
	}
	first.send("echo page-$((6*7))\n")
	first.screenUntil("page-42")
	_ = first.conn.CloseNow() // the tab reloads

	second := open()
	defer func() { _ = second.conn.CloseNow() }()
	if hello := second.control(); hello.Session != "shell" || !hello.Resumed {
		t.Fatalf("after a reload: %+v, want the shell resumed", hello)
	}
	second.screenUntil("page-42") // the scrollback, replayed
	second.send("exit 5\n")
	if end := second.control(); end.Exit == nil || *end.Exit != 5 {
		t.Errorf("the shell's end: %+v, want exit 5", end)
	}
}

// pageTerminal is the page's side of the terminal's WebSocket.
type pageTerminal struct {
	t      *testing.T
	ctx    context.Context
	conn   *websocket.Conn
	screen strings.Builder
}

type pageControl struct {
	Session string
	Resumed bool
	Exit    *int
	Error   string
}

func (p *pageTerminal) send(keys string) {
	if err := p.conn.Write(p.ctx, websocket.MessageBinary, []byte(keys)); err != nil {
		p.t.Fatal(err)
	}
}

// control reads up to the next control message, keeping the bytes before.
func (p *pageTerminal) control() pageControl {
	p.t.Helper()
	for {
		typ, data, err := p.conn.Read(p.ctx)
		if err != nil {
			p.t.Fatalf("the terminal ended without a control message: %v; screen:\n%s", err, p.screen.String())
		}
		if typ == websocket.MessageBinary {
			p.screen.Write(data)
			continue
		}
		var msg pageControl
		if err := json.Unmarshal(data, &msg); err != nil {
			p.t.Fatalf("control message %s: %v", data, err)
		}
		return msg
	}
}

// screenUntil reads the terminal's bytes until they show want.
func (p *pageTerminal) screenUntil(want string) {
	p.t.Helper()
	for !strings.Contains(p.screen.String(), want) {
		typ, data, err := p.conn.Read(p.ctx)
		if err != nil {
			p.t.Fatalf("the terminal never showed %q: %v; screen:\n%s", want, err, p.screen.String())
		}
		if typ == websocket.MessageBinary {
			p.screen.Write(data)
		}
	}
}
