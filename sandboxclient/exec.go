package sandboxclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// LoginShell is the script an interactive session runs with sh -c (ssh
// without a command, the Sandboxes page's terminal): the image's bash when
// it has one, else sh, as a login shell.
const LoginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi`

// ExecOptions describe one command run in a sandbox.
type ExecOptions struct {
	// Command and its arguments; not run through a shell.
	Command []string
	// Stdin, when set, is streamed to the command.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output as it comes; nil
	// discards it. With TTY, both arrive on Stdout.
	Stdout, Stderr io.Writer
	// TTY gives the command a terminal; Resize reports its size changes.
	TTY    bool
	Resize remotecommand.TerminalSizeQueue
	// Timeout ends the command's streams after this long (0: no limit).
	Timeout time.Duration
}

// Exec runs a command in the sandbox's pod and returns its exit code. The
// error is nil whenever the command ran to completion, whatever its code; it
// wraps context.DeadlineExceeded when Timeout passed first. A command killed
// by signal N returns 128+N, as a shell reports it, with a *KilledError
// when the node says it was a signal (a kubelet sends 128+N as the exit code
// itself, which tells it from `exit 137` no better than a shell's $? does).
//
// Where the sandbox's pod has the agent, the command runs through the
// client's session with it (opened at the first call, kept for the
// client's life), and a timeout or a cancelled ctx kills the command's
// whole process group. Through plain exec (no agent), ending the streams
// does not by itself kill the process in the pod on every container
// runtime, and a connection cut before the node sent the exit status reads
// as success in client-go; the file operations guard against that with
// markers of their own.
func (c *Client) Exec(ctx context.Context, name string, opts ExecOptions) (int, error) {
	if len(opts.Command) == 0 {
		return -1, errors.New("no command given")
	}
	defer c.InUse(name)()
	s, t, err := c.sessionOr(ctx, name, "exec in")
	if err != nil {
		return -1, err
	}
	if s != nil {
		return s.exec(ctx, opts)
	}
	return c.exec(ctx, t, opts)
}

func (c *Client) exec(ctx context.Context, t *target, opts ExecOptions) (int, error) {
	runCtx := ctx
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil && !opts.TTY {
		stderr = io.Discard
	}
	executor, err := c.executor(t, &corev1.PodExecOptions{
		Container: t.container, Command: opts.Command,
		Stdin: opts.Stdin != nil, Stdout: true, Stderr: !opts.TTY, TTY: opts.TTY,
	})
	if err != nil {
		return -1, err
	}
	err = executor.StreamWithContext(runCtx, remotecommand.StreamOptions{
		Stdin: opts.Stdin, Stdout: stdout, Stderr: stderr, Tty: opts.TTY, TerminalSizeQueue: opts.Resize,
	})
	if err == nil {
		return 0, nil
	}
	if code, ok := exitCode(err); ok {
		return code, nil
	}
	if killed, ok := killedBy(err); ok {
		return 128 + killed.Number, killed
	}
	if program, ok := missingProgram(err); ok {
		// As a shell says it; with a TTY there is only the one stream.
		shell := stderr
		if opts.TTY {
			shell = stdout
		}
		if shell != nil {
			fmt.Fprintf(shell, "%s: command not found\n", program)
		}
		return 127, nil
	}
	if opts.Timeout > 0 && ctx.Err() == nil && (runCtx.Err() != nil || deadlinePassed(runCtx)) {
		return -1, fmt.Errorf("command did not finish within %s: %w", opts.Timeout, context.DeadlineExceeded)
	}
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return -1, c.explain(ctx, t.sandbox.Name, "exec in", err)
}

// deadlinePassed tells a context whose deadline has come even if its timer
// has not marked it done yet: the WebSocket handshake puts the deadline on
// the connection, whose read can fail with an i/o timeout a moment before
// the context says DeadlineExceeded (seen on a loaded machine).
func deadlinePassed(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

// executor opens exec streams over WebSocket, falling back to SPDY for API
// servers (or proxies) that cannot upgrade to WebSocket, as kubectl does.
func (c *Client) executor(t *target, opts *corev1.PodExecOptions) (remotecommand.Executor, error) {
	url := c.kube.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(t.namespace).Name(t.pod).SubResource("exec").
		VersionedParams(opts, scheme.ParameterCodec).URL()
	websocket, err := remotecommand.NewWebSocketExecutor(c.config, "GET", url.String())
	if err != nil {
		return nil, fmt.Errorf("failed to create WebSocket executor: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.config, "POST", url)
	if err != nil {
		return nil, fmt.Errorf("failed to create SPDY executor: %w", err)
	}
	return remotecommand.NewFallbackExecutor(websocket, spdy, shouldFallback)
}

func shouldFallback(err error) bool {
	return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
}

// kwokExitStatus matches how kwok's node server (the local test cluster's
// fake kubelet, v0.8) reports a command's non-zero exit: as an internal error
// ending in Go's "exit status N" rather than the NonZeroExitCode status a
// kubelet sends.
var kwokExitStatus = regexp.MustCompile(`(?s)error executing command in container: .*: exit status (\d+)$`)

// kwokSignal matches how kwok's node server reports a command killed by a
// signal: Go's "signal: killed" at the end of an internal error.
var kwokSignal = regexp.MustCompile(`(?s)error executing command in container: .*: signal: ([A-Za-z0-9 /]+)$`)

// linuxSignals are the signals by the description Go (strsignal) gives
// them on Linux, where the node runs, whatever the client's OS.
var linuxSignals = map[string]KilledError{
	"hangup": {"HUP", 1}, "interrupt": {"INT", 2}, "quit": {"QUIT", 3}, "illegal instruction": {"ILL", 4},
	"trace/breakpoint trap": {"TRAP", 5}, "aborted": {"ABRT", 6}, "bus error": {"BUS", 7},
	"floating point exception": {"FPE", 8}, "killed": {"KILL", 9}, "user defined signal 1": {"USR1", 10},
	"segmentation fault": {"SEGV", 11}, "user defined signal 2": {"USR2", 12}, "broken pipe": {"PIPE", 13},
	"alarm clock": {"ALRM", 14}, "terminated": {"TERM", 15}, "CPU time limit exceeded": {"XCPU", 24},
	"file size limit exceeded": {"XFSZ", 25},
}

// KilledError is a command that did not exit: a signal ended it.
type KilledError struct {
	// Signal is the signal's name without SIG, as SSH's exit-signal
	// carries it: "KILL", "TERM".
	Signal string
	// Number is the signal's number on Linux.
	Number int
}

func (e *KilledError) Error() string { return "killed by signal " + e.Signal }

// killedBy is the signal a stream error says ended the command, if any.
func killedBy(err error) (*KilledError, bool) {
	m := kwokSignal.FindStringSubmatch(err.Error())
	if m == nil {
		return nil, false
	}
	if sig, ok := linuxSignals[m[1]]; ok {
		return &sig, true
	}
	return nil, false
}

// missingPrograms matches how the runtimes say the command's program does
// not exist: runc (and Go's os/exec, as kwok runs commands) `exec: "x":
// executable file not found in $PATH` or, for a path, `exec: "/x": stat
// /x: no such file or directory`; gVisor `error finding executable "x" in
// PATH [...]`. Each is an internal error of the exec request, not an exit.
var missingPrograms = regexp.MustCompile(`exec: "([^"]+)": (?:executable file not found in \$PATH|stat [^:]*: no such file or directory)|error finding executable "([^"]+)" in PATH`)

// missingProgram is the program of a command that could not start because
// it does not exist, which a shell reports with exit code 127.
func missingProgram(err error) (string, bool) {
	m := missingPrograms.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	return m[1] + m[2], true
}

// exitCode is the command's exit code carried by a stream error, if any.
func exitCode(err error) (int, bool) {
	var coded exec.CodeExitError
	if errors.As(err, &coded) {
		return coded.Code, true
	}
	if m := kwokExitStatus.FindStringSubmatch(err.Error()); m != nil {
		code, convErr := strconv.Atoi(m[1])
		return code, convErr == nil
	}
	return 0, false
}
