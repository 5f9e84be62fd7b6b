package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newSuspendCommand is `suspend gitsync NAME` (suspend) or `resume gitsync
// NAME`, as `flux suspend|resume kustomization` are: suspending stops a
// GitSync syncing, deleting nothing; resuming has it sync at once and
// waits for the outcome.
func newSuspendCommand(suspend bool) *cobra.Command {
	var conn clientFlags
	var timeout time.Duration
	verb, short := "resume", "Have a suspended GitSync sync again, now, and wait for the outcome"
	if suspend {
		verb, short = "suspend", "Stop a GitSync syncing (spec.suspend), deleting nothing, until resumed"
	}
	cmd := &cobra.Command{
		Use:       verb + " gitsync NAME",
		Short:     short,
		Args:      gitSyncArgs,
		ValidArgs: []string{"gitsync"},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[1]
			c, err := conn.kubeClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			gs, err := readGitSync(ctx, c, name)
			if err != nil {
				return err
			}
			if gs.Spec.Suspend != suspend {
				patch := client.MergeFrom(gs.DeepCopy())
				gs.Spec.Suspend = suspend
				if err := c.Patch(ctx, gs, patch); err != nil {
					return fmt.Errorf("failed to %s GitSync %s: %w", verb, name, err)
				}
			}
			if suspend {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "GitSync %s suspended: it syncs nothing until `agentsandbox resume gitsync %s`\n", name, name)
				return err
			}
			return syncNow(cmd, conn, name, timeout)
		},
	}
	conn.register(cmd)
	if !suspend {
		cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the sync")
	}
	return cmd
}

// gitSyncArgs accepts exactly "gitsync NAME".
func gitSyncArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 2 || args[0] != "gitsync" {
		return fmt.Errorf("usage: agentsandbox %s gitsync NAME", cmd.Name())
	}
	return nil
}
