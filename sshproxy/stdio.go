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

func (StdioConn) LocalAddr() net.Addr              { return stdioAddr{} }
func (StdioConn) RemoteAddr() net.Addr             { return stdioAddr{} }
func (StdioConn) SetDeadline(time.Time) error      { return nil }
func (StdioConn) SetReadDeadline(time.Time) error  { return nil }
func (StdioConn) SetWriteDeadline(time.Time) error { return nil }

type stdioAddr struct{}

func (stdioAddr) Network() string { return "stdio" }
func (stdioAddr) String() string  { return "stdio" }
