package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// defaultWait bounds a wait for a sandbox to be Ready or stopped.
const defaultWait = 5 * time.Minute

func newClaimCommand() *cobra.Command {
	var conn clientFlags
	var out outputFlag
	var opts sandboxclient.ClaimOptions
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "claim (--pool POOL | --template TEMPLATE) [--name NAME] [--ttl DURATION] [--wait]",
		Short: "Get a sandbox of your own from a warm pool or a template",
		Long: `Creates a sandbox owned by you. With --pool it claims a Ready member of the
warm pool (or the pool cold-starts one from its template when none is Ready,
which the output says); with --template it starts one from the template.
--wait waits for it to be Ready, printing progress on stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			if wait {
				opts.Wait = timeout
				opts.Progress = progressPrinter(cmd.ErrOrStderr())
			}
			sbx, err := c.Claim(cmd.Context(), opts)
			if err != nil {
				if sbx != nil {
					return fmt.Errorf("%w (the sandbox %s stays; delete it with: agentsandbox delete %s)", err, sbx.Name, sbx.Name)
				}
				return err
			}
			if wait {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "sandbox %s ready: %s\n", sbx.Name, describeLaunch(sbx))
			}
			return out.print(cmd.OutOrStdout(), true, *sbx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Pool, "pool", "", "warm pool to claim from")
	f.StringVar(&opts.Template, "template", "", "template to start from")
	f.StringVar(&opts.Name, "name", "", "sandbox name (default: generated from the pool or template)")
	f.DurationVar(&opts.TTL, "ttl", 0, "lifetime from now, e.g. 2h (default: the template's)")
	f.BoolVar(&wait, "wait", false, "wait for the sandbox to be Ready")
	f.DurationVar(&timeout, "timeout", defaultWait, "how long --wait waits")
	cmd.MarkFlagsMutuallyExclusive("pool", "template")
	cmd.MarkFlagsOneRequired("pool", "template")
	conn.register(cmd)
	out.register(cmd)
	return cmd
}

func newListCommand() *cobra.Command {
	var conn clientFlags
	var out outputFlag
	var all bool
	var opts sandboxclient.ListOptions
	var phase string
	cmd := &cobra.Command{
		Use:   "list [--all] [--owner WHO] [--template NAME] [--phase PHASE]",
		Short: "List your sandboxes (--all: everyone's), filtered by owner, template or phase",
		Long: `Lists sandboxes, yours unless --all. The API server filters by --owner,
--template and --phase and hands the list out in pages of --page-size, all
from one snapshot: a sandbox created or deleted meanwhile is listed once or
not at all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if phase != "" {
				opts.Phase = v1.SandboxPhase(phase)
				if !slices.Contains(v1.SandboxPhases, opts.Phase) {
					return fmt.Errorf("--phase %q: want one of %v", phase, v1.SandboxPhases)
				}
			}
			opts.Mine = !all && opts.Owner == ""
			c, err := conn.client()
			if err != nil {
				return err
			}
			list, err := c.List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), false, list...)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&all, "all", "A", false, "list every sandbox you may see, not only yours")
	f.StringVar(&opts.Owner, "owner", "", "only the sandboxes of this owner (implies --all)")
	f.StringVar(&opts.Template, "template", "", "only the sandboxes of this template (spec.templateRef)")
	f.StringVar(&phase, "phase", "", "only the sandboxes in this phase: Pending, Starting, Running, Stopping, Stopped, Failed or Deleting")
	f.Int64Var(&opts.PageSize, "page-size", sandboxclient.DefaultPageSize, "sandboxes a request to the API server asks for")
	conn.register(cmd)
	out.register(cmd)
	return cmd
}

func newGetCommand() *cobra.Command {
	var conn clientFlags
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			sbx, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), true, *sbx)
		},
	}
	conn.register(cmd)
	out.register(cmd)
	return cmd
}

// newStateCommand is stop or start: set spec.state and, with --wait, wait
// for the sandbox to get there.
func newStateCommand(state v1.SandboxState) *cobra.Command {
	var conn clientFlags
	var wait bool
	var timeout time.Duration
	use, short, done := "stop NAME", "Stop a sandbox: its pod goes, its namespace and workspace stay", "stopped"
	if state == v1.SandboxRunning {
		use, short, done = "start NAME", "Start a stopped sandbox again", "started"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			ctx, name := cmd.Context(), args[0]
			change, waitFor := c.Stop, c.WaitStopped
			if state == v1.SandboxRunning {
				change, waitFor = c.Start, c.WaitReady
			}
			if err := change(ctx, name); err != nil {
				return err
			}
			if wait {
				if _, err := waitFor(ctx, name, timeout, progressPrinter(cmd.ErrOrStderr())); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "sandbox %s %s\n", name, done)
			return err
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the sandbox is Ready (start) or its pod is gone (stop)")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultWait, "how long --wait waits")
	conn.register(cmd)
	return cmd
}

func newDeleteCommand() *cobra.Command {
	var conn clientFlags
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete sandboxes, with their namespaces, pods and workspaces",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			for _, name := range args {
				if err := c.Delete(cmd.Context(), name); err != nil {
					return err
				}
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "sandbox %s deleted\n", name)
			}
			return nil
		},
	}
	conn.register(cmd)
	return cmd
}
