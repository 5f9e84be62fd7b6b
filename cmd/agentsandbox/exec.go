package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// streamFlags are how exec and run connect the local terminal to the
// command.
type streamFlags struct {
	stdin, tty bool
	timeout    time.Duration
}

func (s *streamFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&s.stdin, "stdin", "i", false, "pass stdin to the command")
	cmd.Flags().BoolVarP(&s.tty, "tty", "t", false, "give the command a terminal (with -i, when stdin is one: interactive, following resizes)")
	cmd.Flags().DurationVar(&s.timeout, "command-timeout", 0, "end the command's streams after this long (0: no limit)")
}

// run runs command in the sandbox with the cobra command's streams and
// returns its exit code; a command killed by a signal is an *exitError
// saying which.
func (s *streamFlags) run(ctx context.Context, cmd *cobra.Command, c *sandboxclient.Client, name string, command []string) (int, error) {
	opts := sandboxclient.ExecOptions{
		Command: command, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), TTY: s.tty, Timeout: s.timeout,
	}
	if s.stdin {
		opts.Stdin = cmd.InOrStdin()
	}
	// As kubectl: a terminal only for an interactive session on one.
	if s.tty {
		var t *terminal
		if s.stdin {
			var err error
			if t, err = openTerminal(cmd.InOrStdin()); err != nil {
				return -1, err
			}
		}
		if t == nil {
			_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "Unable to use a TTY: -t needs -i and stdin a terminal")
			opts.TTY = false
		} else {
			defer t.restore()
			opts.Resize = t.sizes
		}
	}
	code, err := c.Exec(ctx, name, opts)
	if killed, ok := errors.AsType[*sandboxclient.KilledError](err); ok {
		// As a shell says it, exiting 128+N.
		return code, &exitError{code: code, err: killed}
	}
	return code, err
}

func newExecCommand() *cobra.Command {
	var conn clientFlags
	var streams streamFlags
	var detach bool
	var as string
	cmd := &cobra.Command{
		Use:   "exec NAME [-i] [-t] [--detach [--name SESSION]] -- COMMAND [ARG...]",
		Short: "Run a command in your sandbox; exits with the command's exit code",
		Long: `Run a command in your sandbox and exit with its exit code. Interrupting exec (or
--command-timeout) kills the command and everything it started, where the sandbox
has the agent. With --detach the command runs in the background, outliving exec
(with -t in a terminal session): exec prints its session name; agentsandbox ps lists
them and agentsandbox attach reattaches.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, command, err := splitCommand(cmd, args, 1)
			if err != nil {
				return err
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			if detach {
				return startDetached(cmd, c, names[0], as, streams.tty, command)
			}
			if as != "" {
				return errors.New("--name names a detached session: use it with --detach")
			}
			code, err := streams.run(cmd.Context(), cmd, c, names[0], command)
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	streams.register(cmd)
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "run the command in the background, outliving exec (needs the sandbox agent)")
	cmd.Flags().StringVar(&as, "name", "", "with --detach: the session's name (default: one the agent picks)")
	conn.register(cmd)
	return cmd
}
