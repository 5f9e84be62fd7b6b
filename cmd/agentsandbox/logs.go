package main

import (
	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

func newLogsCommand() *cobra.Command {
	var conn clientFlags
	var opts sandboxclient.LogOptions
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the log of your sandbox's main process",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			return c.Logs(cmd.Context(), args[0], cmd.OutOrStdout(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new lines")
	cmd.Flags().Int64Var(&opts.TailLines, "tail", 0, "print only this many last lines (0: all)")
	conn.register(cmd)
	return cmd
}
