package main

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
	"k8s.io/client-go/tools/remotecommand"
)

// terminal is the local terminal an interactive command (-it) uses: raw
// while the command runs, and its size followed on SIGWINCH.
type terminal struct {
	fd      int
	state   *term.State
	sizes   chan remotecommand.TerminalSize
	winch   chan os.Signal
	stopped chan struct{}
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
	t := &terminal{fd: fd, state: state, sizes: make(chan remotecommand.TerminalSize, 1),
		winch: make(chan os.Signal, 1), stopped: make(chan struct{})}
	t.push()
	signal.Notify(t.winch, syscall.SIGWINCH)
	go func() {
		for {
			select {
			case <-t.winch:
				t.push()
			case <-t.stopped:
				return
			}
		}
	}()
	return t, nil
}

// push queues the current size, replacing one not yet sent.
func (t *terminal) push() {
	w, h, err := term.GetSize(t.fd)
	if err != nil {
		return
	}
	select {
	case <-t.sizes:
	default:
	}
	t.sizes <- remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
}

// Next is remotecommand.TerminalSizeQueue: the next size, nil when done.
func (t *terminal) Next() *remotecommand.TerminalSize {
	select {
	case size := <-t.sizes:
		return &size
	case <-t.stopped:
		return nil
	}
}

// restore leaves raw mode and stops following the size.
func (t *terminal) restore() {
	signal.Stop(t.winch)
	close(t.stopped)
	_ = term.Restore(t.fd, t.state)
}
