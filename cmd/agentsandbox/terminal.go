package main

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// terminal is the local terminal an interactive command (-it) uses: raw
// while the command runs, and its size followed on SIGWINCH.
type terminal struct {
	fd    int
	state *term.State
	winch chan os.Signal
	// sizes is the command's ExecOptions.Resize.
	sizes    *sandboxclient.TerminalSizes
	restored sync.Once
}

// openTerminal puts stdin's terminal in raw mode; nil when stdin is not a
// terminal.
func openTerminal(stdin io.Reader) (*terminal, error) {
	f, ok := stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, nil
	}
	fd := int(f.Fd())
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, err
	}
	t := &terminal{fd: fd, state: state, winch: make(chan os.Signal, 1), sizes: sandboxclient.NewTerminalSizes()}
	t.push()
	signal.Notify(t.winch, syscall.SIGWINCH)
	go func() {
		for range t.winch {
			t.push()
		}
	}()
	return t, nil
}

// push queues the terminal's current size.
func (t *terminal) push() {
	if w, h, err := term.GetSize(t.fd); err == nil {
		t.sizes.Push(uint32(w), uint32(h))
	}
}

// size is the terminal's current size.
func (t *terminal) size() (cols, rows uint16, err error) {
	w, h, err := term.GetSize(t.fd)
	return uint16(min(w, 0xffff)), uint16(min(h, 0xffff)), err
}

// restore leaves raw mode and stops following the size; again, it does
// nothing.
func (t *terminal) restore() {
	t.restored.Do(func() {
		signal.Stop(t.winch)
		close(t.winch)
		t.sizes.Close()
		_ = term.Restore(t.fd, t.state)
	})
}
