package sshproxy

import (
	"io"
	"net"
	"time"
)

// StdioConn is a net.Conn over a reader and a writer: the standard input
// and output of a ProxyCommand, which is the client's end of the
// connection.
type StdioConn struct {
	io.Reader
	io.WriteCloser
}

// LocalAddr is a placeholder: standard input and output have no address.
func (StdioConn) LocalAddr() net.Addr { return stdioAddr{} }

// RemoteAddr is a placeholder: standard input and output have no address.
func (StdioConn) RemoteAddr() net.Addr { return stdioAddr{} }

// SetDeadline does nothing: pipes have no deadlines, and the SSH server
// sets none on its connection.
func (StdioConn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline does nothing, as SetDeadline.
func (StdioConn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline does nothing, as SetDeadline.
func (StdioConn) SetWriteDeadline(time.Time) error { return nil }

type stdioAddr struct{}

func (stdioAddr) Network() string { return "stdio" }
func (stdioAddr) String() string  { return "stdio" }
