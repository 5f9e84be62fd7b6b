package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

// detachKey is the byte that detaches from a terminal session: Ctrl-].
const detachKey = 0x1d

func newAttachCommand() *cobra.Command {
	var conn clientFlags
	cmd := &cobra.Command{
		Use:   "attach NAME [SESSION]",
		Short: "Attach to a terminal in your sandbox that outlives the connection (Ctrl-] detaches)",
		Long: `Attach to a named terminal session in the sandbox, or to a process started with
exec --detach. Without SESSION it is "` + sandboxclient.DefaultShell + `", a login shell made at the first attach
(the page's terminal is the same shell).
What the session printed while nobody was attached is shown first. Ctrl-] detaches,
as does a dropped connection: the session runs on, and attach reattaches.
It needs the sandbox agent in the sandbox's pod.`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeSessions(&conn),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			s, err := c.Session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.InUse(args[0])()
			id := sandboxclient.DefaultShell
			if len(args) == 2 {
				id = args[1]
			}
			return attach(cmd, s, id, len(args) == 1)
		},
	}
	conn.register(cmd)
	return cmd
}

// attach connects the local terminal to process id, making the default
// login shell when asked to and it is missing.
func attach(cmd *cobra.Command, s *sandboxclient.Session, id string, makeShell bool) error {
	ctx := cmd.Context()
	t, err := openTerminal(cmd.InOrStdin())
	if err != nil {
		return err
	}
	var size *wire.Size
	opts := session.AttachOptions{Offset: -1, Stdout: cmd.OutOrStdout()}
	if t != nil {
		defer t.restore()
		if cols, rows, err := t.size(); err == nil {
			size = &wire.Size{Cols: cols, Rows: rows}
		}
		opts.Size, opts.Resize = size, sandboxclient.Sizes(t.sizes)
	}
	if makeShell {
		if _, err := s.Shell(ctx, id, size); err != nil {
			return err
		}
	}
	attachCtx, detach := context.WithCancel(ctx)
	defer detach()
	opts.Stdin = &detachReader{r: cmd.InOrStdin(), detach: detach}
	exit, err := s.Attach(attachCtx, id, opts)
	if t != nil {
		t.restore()
	}
	switch {
	case err != nil:
		return err
	case exit == nil:
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "\r\ndetached from %s in %s; it runs on: agentsandbox attach %s %s\n", id, s.Sandbox, s.Sandbox, id)
		return nil
	case exit.Signal != "":
		return &exitError{code: exit.Code, err: fmt.Errorf("%s ended by signal %s", id, exit.Signal)}
	case exit.Code != 0:
		return &exitError{code: exit.Code}
	}
	return nil
}

// detachReader passes the terminal's input on until the detach key.
type detachReader struct {
	r      io.Reader
	detach func()
}

func (d *detachReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if i := strings.IndexByte(string(p[:n]), detachKey); i >= 0 {
		d.detach()
		return i, io.EOF
	}
	return n, err
}

func newPsCommand() *cobra.Command {
	var conn clientFlags
	cmd := &cobra.Command{
		Use:   "ps NAME",
		Short: "List the background processes and terminal sessions of your sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			s, err := c.Session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			list, err := s.Processes(cmd.Context())
			if err != nil {
				return err
			}
			printProcesses(cmd.OutOrStdout(), list, time.Now())
			return nil
		},
	}
	conn.register(cmd)
	return cmd
}

func printProcesses(w io.Writer, list []wire.Process, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "SESSION\tPID\tSTATE\tTERMINAL\tATTACHED\tSTARTED\tOUTPUT\tCOMMAND")
	for _, p := range list {
		state := "running"
		if e := p.Exited; e != nil {
			state = fmt.Sprintf("exited %d", e.Code)
			if e.Signal != "" {
				state = "killed by " + e.Signal
			}
		}
		terminal := "no"
		if p.TTY {
			terminal = "yes"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s ago\t%d B\t%s\n", p.ID, p.PID, state, terminal, p.Attached,
			now.Sub(p.Started).Round(time.Second), p.Output, strings.Join(p.Command, " "))
	}
	_ = tw.Flush()
}

// completeSessions completes a sandbox's session names as attach's second
// argument.
func completeSessions(conn *clientFlags) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) != 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := conn.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		s, err := c.Session(ctx, args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := s.Processes(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		for _, p := range list {
			if p.Exited == nil {
				names = append(names, p.ID+"\t"+strings.Join(p.Command, " "))
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// startDetached is exec --detach: the command as a background process
// (with -t a terminal session) that outlives this command.
func startDetached(cmd *cobra.Command, c *sandboxclient.Client, name, as string, tty bool, command []string) error {
	s, err := c.Session(cmd.Context(), name)
	if errors.Is(err, sandboxclient.ErrNoAgent) {
		return fmt.Errorf("exec --detach needs the sandbox agent: %w", err)
	}
	if err != nil {
		return err
	}
	p, err := s.Start(cmd.Context(), session.StartOptions{Name: as, Command: command, TTY: tty})
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", p.ID)
	_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "started %s (pid %d) in %s: agentsandbox attach %s %s; agentsandbox ps %s\n",
		p.ID, p.PID, name, name, p.ID, name)
	return nil
}
