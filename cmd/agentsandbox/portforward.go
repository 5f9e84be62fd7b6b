package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/portforward"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

func newPortForwardCommand() *cobra.Command {
	var conn clientFlags
	var addresses []string
	cmd := &cobra.Command{
		Use:   "port-forward NAME [LOCAL:]REMOTE...",
		Short: "Forward local ports to your sandbox until interrupted",
		Long: `Listens on LOCAL (0 or left out before the colon: a free port) on
127.0.0.1 and forwards each connection to REMOTE in the sandbox, through
the API server, with your credentials.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			ctx, _ := interruptible(cmd.Context())
			err = c.PortForward(ctx, args[0], sandboxclient.PortForwardOptions{
				Ports: args[1:], Addresses: addresses, ErrOut: cmd.ErrOrStderr(),
				Ready: func(ports []portforward.ForwardedPort) {
					for _, p := range ports {
						_, _ = fmt.Fprintf(cmd.OutOrStdout(), "forwarding %d -> %s:%d\n", p.Local, args[0], p.Remote)
					}
				},
			})
			if ctx.Err() != nil {
				return nil // interrupted: the normal way to stop
			}
			return err
		},
	}
	cmd.Flags().StringSliceVar(&addresses, "address", []string{"127.0.0.1"}, "local addresses to listen on")
	conn.register(cmd)
	return cmd
}
