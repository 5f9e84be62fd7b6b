package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/webui"
)

// defaultUIAddress is where `agentsandbox ui` serves unless told otherwise:
// loopback, so only this machine's browser reaches it.
const defaultUIAddress = "127.0.0.1:8090"

// newUICommand is `agentsandbox ui`: the Sandboxes page, served locally and
// acting as the caller's Kubernetes identity.
func newUICommand() *cobra.Command {
	var conn clientFlags
	var address string
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the Sandboxes page on " + defaultUIAddress + ", acting as your Kubernetes identity",
		Long: "Serves the Sandboxes page: the installation's status, templates, warm pools, Git syncs and sandboxes, " +
			"followed live, with new, stop, start, delete, logs and an inline terminal. Every action is taken with the " +
			"kubeconfig's identity (--kubeconfig, --context, --as), so RBAC and the admission policies decide as for " +
			"kubectl; nothing of the kubeconfig reaches the browser. It listens on loopback unless --address names " +
			"another address.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := conn.config()
			if err != nil {
				return err
			}
			if !isLoopback(address) {
				fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: %s is not a loopback address: whoever reaches it acts on the cluster as you "+
					"(the page has no login of its own). Prefer the default and an SSH tunnel.\n", address)
			}
			srv, err := webui.New(cfg, webui.Options{Context: conn.contextName(), Server: cfg.Host})
			if err != nil {
				return err
			}
			if !srv.TerminalAvailable() {
				fmt.Fprintln(cmd.ErrOrStderr(), "note: this binary was built without the terminal emulator (run make build, "+
					"which runs hack/web.sh first); the page offers no inline terminal")
			}
			l, err := net.Listen("tcp", address)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// The address is named once the page loads at once: a
			// browser opened on it meanwhile would wait without a word.
			fmt.Fprintf(cmd.ErrOrStderr(), "Reading the cluster at %s…\n", cfg.Host)
			if srv.Start(ctx) != nil {
				return nil // interrupted while reading
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Sandboxes page at http://%s/ (press Ctrl-C to stop)\n", l.Addr())
			return srv.Serve(ctx, l)
		},
	}
	conn.register(cmd)
	cmd.Flags().StringVar(&address, "address", defaultUIAddress, "address to serve the page on; anything but loopback lets others act as you")
	return cmd
}

// isLoopback says whether addr (host:port) is on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
