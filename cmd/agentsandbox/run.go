package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// deleteTimeout bounds the clean-up after a run, which must happen even
// when the run was interrupted.
const deleteTimeout = 30 * time.Second

func newRunCommand() *cobra.Command {
	var conn clientFlags
	var streams streamFlags
	var opts sandboxclient.ClaimOptions
	var quiet bool
	cmd := &cobra.Command{
		Use:   "run (--pool POOL | --template TEMPLATE) [-i] [-t] -- COMMAND [ARG...]",
		Short: "Claim a sandbox, run one command in it, delete it; exits with the command's exit code",
		Long: `One call for "agent outside, code inside": claims a sandbox, waits for it
to be Ready, runs the command with its output streamed, deletes the sandbox
and exits with the command's exit code. The sandbox is deleted whatever
happens: the command fails, the wait fails, or the run is interrupted
(SIGINT or SIGTERM; the exit code is then 130 or 143).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, command, err := splitCommand(cmd, args, 0)
			if err != nil {
				return err
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			ctx, caught := interruptible(cmd.Context())
			if !quiet {
				opts.Progress = progressPrinter(cmd.ErrOrStderr())
			}
			sbx, err := c.Claim(ctx, opts)
			if sbx != nil {
				defer deleteAfterRun(cmd, c, sbx.Name, quiet)
			}
			if code, interrupted := caught(); interrupted {
				return &exitError{code: code}
			}
			if err != nil {
				return err
			}
			if !quiet {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "sandbox %s ready: %s\n", sbx.Name, describeLaunch(sbx))
			}
			code, err := streams.run(ctx, cmd, c, sbx.Name, command)
			if signalCode, interrupted := caught(); interrupted {
				return &exitError{code: signalCode}
			}
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Pool, "pool", "", "warm pool to claim from")
	f.StringVar(&opts.Template, "template", "", "template to start from")
	f.DurationVar(&opts.TTL, "ttl", time.Hour, "lifetime of the sandbox, in case this process dies before deleting it")
	f.DurationVar(&opts.Wait, "timeout", defaultWait, "how long to wait for the sandbox to be Ready")
	f.BoolVarP(&quiet, "quiet", "q", false, "print nothing but the command's output")
	cmd.MarkFlagsMutuallyExclusive("pool", "template")
	cmd.MarkFlagsOneRequired("pool", "template")
	streams.register(cmd)
	conn.register(cmd)
	return cmd
}

// interruptible returns a context cancelled by SIGINT or SIGTERM and a
// function saying whether one came, with the exit code a shell would give
// (128 + the signal). Signals stay caught afterwards, so a second Ctrl-C
// cannot cut the clean-up short.
func interruptible(parent context.Context) (context.Context, func() (int, bool)) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	var got os.Signal
	done := make(chan struct{})
	go func() {
		got = <-signals
		close(done)
		cancel()
	}()
	return ctx, func() (int, bool) {
		select {
		case <-done:
			return 128 + int(got.(syscall.Signal)), true
		default:
			return 0, false
		}
	}
}

// deleteAfterRun deletes the run's sandbox with a context of its own: the
// run's may be cancelled by then.
func deleteAfterRun(cmd *cobra.Command, c *sandboxclient.Client, name string, quiet bool) {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	if err := c.Delete(ctx, name); err != nil && !sandboxclient.IsNotFound(err) {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "Error: deleting sandbox %s: %v\n", name, err)
		return
	}
	if !quiet {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "sandbox %s deleted\n", name)
	}
}
