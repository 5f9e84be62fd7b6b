package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/version"
	"github.com/agentsandbox/terraform-provider-agentsandbox/mcpserver"
)

// newMCPCommand is `agentsandbox mcp`: sandboxes as Model Context Protocol
// tools for coding agents, over stdio (the agent starts the command) or,
// with --http, streamable HTTP on a loopback address.
func newMCPCommand() *cobra.Command {
	var conn clientFlags
	var httpAddr string
	opts := mcpserver.Options{Version: version.Version}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve sandboxes to coding agents as Model Context Protocol tools (stdio, or --http on loopback)",
		Long: "Serves list_templates, list_sandboxes, create_sandbox, run_command, write_file, read_file, list_files, " +
			"stop_sandbox, start_sandbox, delete_sandbox and run_once over the Model Context Protocol, acting as the " +
			"identity of the kubeconfig (--kubeconfig, --context, --as): RBAC and the admission policies decide as for " +
			"kubectl, and no tool accepts credentials from the agent. Every sandbox it creates gets a lifetime of at " +
			"most --lifetime.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sdk, err := conn.client()
			if err != nil {
				return err
			}
			// The server's log: once per pod that has no sandbox agent, so
			// its operations go through plain exec.
			sdk.Notices = cmd.ErrOrStderr()
			kube, err := conn.kubeClient()
			if err != nil {
				return err
			}
			server := mcpserver.New(sdk, kube, opts)
			if httpAddr == "" {
				return server.Run(cmd.Context(), mcpserver.StdioTransport(os.Stdin, os.Stdout))
			}
			return serveHTTP(cmd, server, httpAddr)
		},
	}
	conn.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&httpAddr, "http", "", "serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8091) instead of stdio")
	fl.DurationVar(&opts.Lifetime, "lifetime", mcpserver.DefaultLifetime, "lifetime of the sandboxes it creates, and the most an agent may ask for")
	fl.IntVar(&opts.OutputLimit, "output-limit", mcpserver.DefaultOutputLimit, "bytes of a command's stdout and of its stderr returned; the rest is counted as dropped")
	fl.DurationVar(&opts.ReadyTimeout, "ready-timeout", mcpserver.DefaultReadyTimeout, "how long to wait for a created or started sandbox")
	return cmd
}

// serveHTTP serves the MCP endpoint at /mcp on a loopback address only:
// whoever reaches it acts with this process's Kubernetes identity.
func serveHTTP(cmd *cobra.Command, server *mcp.Server, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--http %s: %w", addr, err)
	}
	if !isLoopback(addr) {
		return fmt.Errorf("--http %s: only a loopback address (127.0.0.1, ::1, localhost) is served, "+
			"as every caller acts with your Kubernetes identity", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpserver.HTTPHandler(server))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.ErrOrStderr(), "serving MCP at http://%s/mcp\n", l.Addr())
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
