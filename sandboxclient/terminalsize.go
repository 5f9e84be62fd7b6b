package sandboxclient

import (
	"sync"

	"k8s.io/client-go/tools/remotecommand"
)

// TerminalSizes is the ExecOptions.Resize of an interactive terminal (the
// CLI's, an SSH session's, the web page's): it holds the latest size not yet
// sent, as a window resized several times while the stream is busy needs
// only its last size. Push from any goroutine; Close ends the queue.
type TerminalSizes struct {
	sizes     chan remotecommand.TerminalSize
	closed    chan struct{}
	closeOnce sync.Once
}

// NewTerminalSizes returns an empty queue.
func NewTerminalSizes() *TerminalSizes {
	return &TerminalSizes{sizes: make(chan remotecommand.TerminalSize, 1), closed: make(chan struct{})}
}

// Push queues a size, replacing one not yet sent. Sizes beyond a terminal's
// 16 bits are clamped.
func (q *TerminalSizes) Push(columns, rows uint32) {
	size := remotecommand.TerminalSize{Width: uint16(min(columns, 0xffff)), Height: uint16(min(rows, 0xffff))}
	select {
	case <-q.sizes:
	default:
	}
	select {
	case q.sizes <- size:
	default: // another Push won the race; its size is as recent
	}
}

// Next is remotecommand.TerminalSizeQueue: the next size, nil once closed.
func (q *TerminalSizes) Next() *remotecommand.TerminalSize {
	select {
	case size := <-q.sizes:
		return &size
	case <-q.closed:
		return nil
	}
}

// Close ends the queue: Next returns nil from now on.
func (q *TerminalSizes) Close() { q.closeOnce.Do(func() { close(q.closed) }) }
