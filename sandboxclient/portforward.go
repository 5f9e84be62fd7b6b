package sandboxclient

import (
	"context"
	"fmt"
	"io"
	"net/http"

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
	url := c.kube.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(t.namespace).Name(t.pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(c.config)
	if err != nil {
		return err
	}
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	tunneling, err := portforward.NewSPDYOverWebsocketDialerForStreaming(url, c.config)
	if err != nil {
		return err
	}
	dialer = portforward.NewFallbackDialerForStreaming(tunneling, dialer, func(err error) bool {
		return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
	})
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
