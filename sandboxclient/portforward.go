package sandboxclient

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// PortForwardOptions describe a port-forward session.
type PortForwardOptions struct {
	// Ports are "LOCAL:REMOTE" pairs or a bare "PORT" for both; LOCAL 0
	// picks a free port.
	Ports []string
	// Addresses to listen on; default 127.0.0.1 only, so nobody else on the
	// network reaches the sandbox through the caller's credentials.
	Addresses []string
	// Ready, when set, receives the local ports once they listen.
	Ready func([]portforward.ForwardedPort)
	// Out and ErrOut receive client-go's messages ("Forwarding from ...",
	// "Handling connection ..."); nil discards them.
	Out, ErrOut io.Writer
}

// PortForward forwards local ports to the sandbox's pod until ctx ends.
// Where the pod has the agent, each connection is a dial through the
// client's session with it, which works on every runtime (the kubelet
// cannot forward into a gVisor pod); else it tunnels through the kubelet
// over WebSocket, falling back to SPDY, as kubectl does.
func (c *Client) PortForward(ctx context.Context, name string, opts PortForwardOptions) error {
	s, t, err := c.sessionOr(ctx, name, "forward ports of")
	if err != nil {
		return err
	}
	if s != nil {
		return s.forward(ctx, opts)
	}
	dialer, err := c.portForwardDialer(t)
	if err != nil {
		return err
	}
	addresses := opts.Addresses
	if len(addresses) == 0 {
		addresses = []string{"127.0.0.1"}
	}
	out, errOut := opts.Out, opts.ErrOut
	if out == nil {
		out = io.Discard
	}
	if errOut == nil {
		errOut = io.Discard
	}
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddressesForStreamingWithContext(ctx, dialer, addresses, opts.Ports, ready, out, errOut)
	if err != nil {
		return err
	}
	if opts.Ready != nil {
		go func() {
			select {
			case <-ready:
				if ports, err := fw.GetPorts(); err == nil {
					opts.Ready(ports)
				}
			case <-ctx.Done():
			}
		}()
	}
	if err := fw.ForwardPorts(); err != nil {
		return fmt.Errorf("port-forward to sandbox %s: %w", name, c.explain(ctx, name, "forward ports of", err))
	}
	return nil
}

// portForwardDialer connects to the pod's port-forward endpoint over
// WebSocket, falling back to SPDY, as kubectl does.
func (c *Client) portForwardDialer(t *target) (streamhttp.Dialer, error) {
	url := c.kube.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(t.namespace).Name(t.pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(c.config)
	if err != nil {
		return nil, err
	}
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	tunneling, err := portforward.NewSPDYOverWebsocketDialerForStreaming(url, c.config)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialerForStreaming(tunneling, dialer, shouldFallback), nil
}

// DialPort opens one connection to a port of the sandbox's pod through the
// API server, as port-forward does for each connection it accepts, but
// without listening on a local port: for a caller that already has the
// other end (an SSH channel, say). Closing it ends the connection.
func (c *Client) DialPort(ctx context.Context, name string, port uint16) (io.ReadWriteCloser, error) {
	s, t, err := c.sessionOr(ctx, name, "forward ports of")
	if err != nil {
		return nil, err
	}
	if s != nil {
		conn, err := s.Dial(ctx, int(port))
		if err != nil {
			return nil, err
		}
		return &usedConn{ReadWriteCloser: conn, done: c.InUse(name)}, nil
	}
	dialer, err := c.portForwardDialer(t)
	if err != nil {
		return nil, err
	}
	conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, c.explain(ctx, name, "forward ports of", err)
	}
	// The port-forward protocol: an error stream, on which the node reports
	// why the port could not be reached, and a data stream, paired by
	// port and request ID.
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("port-forward to sandbox %s port %d: %w", name, port, err)
	}
	_ = errorStream.Close() // nothing is sent on it
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("port-forward to sandbox %s port %d: %w", name, port, err)
	}
	pc := &portConn{data: data, conn: conn, watched: make(chan struct{})}
	go pc.watch(errorStream, fmt.Sprintf("sandbox %s port %d", name, port))
	return &usedConn{ReadWriteCloser: pc, done: c.InUse(name)}, nil
}

// usedConn is a forwarded connection that counts as a use of its sandbox
// until it is closed (Client.InUse).
type usedConn struct {
	io.ReadWriteCloser
	done func()
}

func (u *usedConn) Close() error {
	u.done()
	return u.ReadWriteCloser.Close()
}

// portConn is one forwarded connection. The node ends the error stream
// when the connection ends, with a message if it failed (the port refused
// the connection, say): the Read that ends returns that message.
type portConn struct {
	data    io.ReadWriteCloser
	conn    io.Closer
	watched chan struct{}
	err     error
}

func (p *portConn) watch(errorStream io.Reader, what string) {
	defer close(p.watched)
	if msg, _ := io.ReadAll(errorStream); len(msg) > 0 {
		p.err = fmt.Errorf("%s: %s", what, msg)
	}
}

func (p *portConn) Read(b []byte) (int, error) {
	n, err := p.data.Read(b)
	if err != nil {
		// As client-go's port-forward, expect the error stream's word on
		// how the connection ended, but never wait long for it.
		select {
		case <-p.watched:
			if p.err != nil {
				return n, p.err
			}
		case <-time.After(5 * time.Second):
		}
	}
	return n, err
}

func (p *portConn) Write(b []byte) (int, error) { return p.data.Write(b) }

func (p *portConn) Close() error {
	_ = p.data.Close()
	return p.conn.Close()
}

// forward is PortForward through the session: a local listener per port
// and address, each connection a dial inside the sandbox.
func (s *Session) forward(ctx context.Context, opts PortForwardOptions) error {
	addresses := opts.Addresses
	if len(addresses) == 0 {
		addresses = []string{"127.0.0.1"}
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	var forwarded []portforward.ForwardedPort
	serve := make(chan error, 1)
	for _, spec := range opts.Ports {
		local, remote, err := parsePorts(spec)
		if err != nil {
			return err
		}
		for _, addr := range addresses {
			l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(int(local))))
			if err != nil {
				return fmt.Errorf("listening on %s for sandbox %s port %d: %w", addr, s.Sandbox, remote, err)
			}
			listeners = append(listeners, l)
			local = uint16(l.Addr().(*net.TCPAddr).Port)
			_, _ = fmt.Fprintf(out, "Forwarding from %s -> %d\n", l.Addr(), remote)
			go func() { serve <- s.accept(ctx, l, remote, out) }()
		}
		forwarded = append(forwarded, portforward.ForwardedPort{Local: local, Remote: remote})
	}
	if opts.Ready != nil {
		opts.Ready(forwarded)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-s.Done():
		return fmt.Errorf("port-forward to sandbox %s: the session with its agent ended (stopped or deleted?)", s.Sandbox)
	case err := <-serve:
		return err
	}
}

// accept serves one listener's connections until it closes.
func (s *Session) accept(ctx context.Context, l net.Listener, port uint16, out io.Writer) error {
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer func() { _ = conn.Close() }()
			defer s.inUse()()
			_, _ = fmt.Fprintf(out, "Handling connection for %d\n", port)
			remote, err := s.Dial(ctx, int(port))
			if err != nil {
				_, _ = fmt.Fprintf(out, "port %d: %v\n", port, err)
				return
			}
			defer func() { _ = remote.Close() }()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(remote, conn)
				_ = remote.Close()
				close(done)
			}()
			_, _ = io.Copy(conn, remote)
			_ = conn.Close()
			<-done
		}()
	}
}

// parsePorts reads "LOCAL:REMOTE" or "PORT", as kubectl port-forward does.
func parsePorts(spec string) (local, remote uint16, err error) {
	l, r, pair := strings.Cut(spec, ":")
	if !pair {
		r = l
	}
	if l == "" {
		l = "0"
	}
	lp, errL := strconv.ParseUint(l, 10, 16)
	rp, errR := strconv.ParseUint(r, 10, 16)
	if errL != nil || errR != nil || rp == 0 {
		return 0, 0, fmt.Errorf("invalid port %q: want LOCAL:REMOTE or PORT, each 0-65535 (a remote port 1-65535)", spec)
	}
	return uint16(lp), uint16(rp), nil
}
