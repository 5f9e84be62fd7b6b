package sandboxclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
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
// It tunnels over WebSocket, falling back to SPDY, as kubectl does.
func (c *Client) PortForward(ctx context.Context, name string, opts PortForwardOptions) error {
	t, err := c.resolve(ctx, name, "forward ports of")
	if err != nil {
		return err
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
	t, err := c.resolve(ctx, name, "forward ports of")
	if err != nil {
		return nil, err
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
	return pc, nil
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
