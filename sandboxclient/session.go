package sandboxclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

// Session is a connection to a sandbox's agent (package session) over one
// exec stream: commands, background processes and terminals that outlive
// it, files, watches and dials, each without an exec of its own. Its file
// operations are confined to the workspace.
type Session struct {
	*session.Session
	// Sandbox is the sandbox's name, Workspace its workspace's mount path.
	Sandbox, Workspace string
	pod                types.UID
	// inUse is the client's InUse for this sandbox: a forwarded
	// connection counts as a use while it lasts.
	inUse func() (done func())
}

// ErrNoAgent is a sandbox whose pod has no agent: made by a reconciler
// without an --egress-gate-image, or on a node that only pretends to run
// containers (kwok). Its operations go through plain exec instead.
var ErrNoAgent = errors.New("the sandbox's pod has no agent")

// Session returns the client's session with the sandbox's agent, opened
// at the first call and kept for the client's life (Exec and the file
// operations use it too); an error wrapping ErrNoAgent where the pod has
// no agent.
func (c *Client) Session(ctx context.Context, name string) (*Session, error) {
	s, t, err := c.sessionOr(ctx, name, "connect to")
	if err != nil {
		return nil, err
	}
	if s == nil {
		// sessionOr told why, once per pod.
		c.sessions.mu.Lock()
		defer c.sessions.mu.Unlock()
		return nil, c.sessions.told[t.running.UID]
	}
	return s, nil
}

// Sizes turns a terminal's size queue into the channel the session's
// commands and attaches follow; it closes when the queue ends. A size not
// yet taken is replaced by a newer one, so a command that ended (and reads
// no more) never holds the queue's reader up.
func Sizes(q remotecommand.TerminalSizeQueue) <-chan wire.Size {
	if q == nil {
		return nil
	}
	sizes := make(chan wire.Size, 1)
	go func() {
		defer close(sizes)
		for size := q.Next(); size != nil; size = q.Next() {
			latest := wire.Size{Cols: size.Width, Rows: size.Height}
			select {
			case sizes <- latest:
			default:
				// The only sender: once the stale size is out, there is room.
				select {
				case <-sizes:
				default:
				}
				sizes <- latest
			}
		}
	}()
	return sizes
}

// hasAgent tells whether the pod's sandbox container mounts the agent.
func hasAgent(t *target) bool {
	for _, m := range t.running.Spec.Containers[0].VolumeMounts {
		if m.Name == v1.AgentVolumeName {
			return true
		}
	}
	return false
}

// openSession execs the agent's relay in t's pod and greets it. The exec
// lives as long as the session, not as long as any one caller's context.
func (c *Client) openSession(t *target) (*Session, error) {
	if !hasAgent(t) {
		return nil, fmt.Errorf("sandbox %s: %w", t.sandbox.Name, ErrNoAgent)
	}
	toAgent, agentIn := io.Pipe()
	fromAgent, agentOut := io.Pipe()
	streamCtx, cancel := context.WithCancel(context.Background())
	stderr := &tailBuffer{max: 4 << 10}
	go func() {
		code, err := c.exec(streamCtx, t, ExecOptions{Command: []string{v1.AgentPath, "connect"}, Stdin: toAgent, Stdout: agentOut, Stderr: stderr})
		agentOut.CloseWithError(relayEnded(t.sandbox.Name, code, err, stderr.String()))
	}()
	conn := &execConn{Reader: fromAgent, Writer: agentIn, close: func() {
		cancel()
		_ = agentIn.Close()
		_ = fromAgent.Close()
	}}
	s, err := session.Open(conn)
	if err != nil {
		if errors.Is(err, ErrNoAgent) {
			return nil, err
		}
		return nil, fmt.Errorf("opening a session with sandbox %s: %w", t.sandbox.Name, err)
	}
	name := t.sandbox.Name
	return &Session{Session: s.WithRoot(t.workspace), Sandbox: name, Workspace: t.workspace, pod: t.running.UID,
		inUse: func() func() { return c.InUse(name) }}, nil
}

// relayEnded says why the exec of the agent's relay ended.
func relayEnded(name string, code int, err error, stderr string) error {
	switch {
	case err != nil && strings.Contains(err.Error(), v1.AgentPath) && strings.Contains(err.Error(), "no such file"):
		// kwok runs commands on its host, where there is no agent.
		return fmt.Errorf("sandbox %s: %w (%v)", name, ErrNoAgent, err)
	case err != nil:
		return err
	case code == 127 || code == 126 || strings.Contains(stderr, "no such file"):
		// The pod says it has the agent, yet the node has no such file:
		// a node that runs no containers of its own.
		return fmt.Errorf("sandbox %s: %w (%s)", name, ErrNoAgent, strings.TrimSpace(stderr))
	case stderr != "":
		return fmt.Errorf("the agent's relay ended with code %d: %s", code, strings.TrimSpace(stderr))
	}
	return io.EOF
}

// execConn is the exec stream as the session's connection.
type execConn struct {
	io.Reader
	io.Writer
	once  sync.Once
	close func()
}

func (e *execConn) Close() error {
	e.once.Do(e.close)
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.Clone(b.buf))
}

// sessions are the client's open sessions, by sandbox, and the sandboxes
// already told to have no agent.
type sessions struct {
	mu   sync.Mutex
	open map[string]*Session
	// told are the pods said to have no agent, and why.
	told map[types.UID]error
}

// sessionOr returns the sandbox's session when its pod has the agent, else
// its resolved target for plain exec (saying so once per pod, on Notices).
// A kept session is used without reading the sandbox again: it ends when
// the pod goes away, and the next call opens another.
func (c *Client) sessionOr(ctx context.Context, name, action string) (*Session, *target, error) {
	c.sessions.mu.Lock()
	s := c.sessions.open[name]
	c.sessions.mu.Unlock()
	if s != nil {
		select {
		case <-s.Done():
		default:
			c.used(name)
			return s, nil, nil
		}
	}
	t, err := c.resolve(ctx, name, action)
	if err != nil {
		return nil, nil, err
	}
	if !hasAgent(t) {
		c.tellNoAgent(t, fmt.Errorf("sandbox %s: %w (it was made by a reconciler without --egress-gate-image)", name, ErrNoAgent))
		return nil, t, nil
	}
	s, err = c.openSession(t)
	if errors.Is(err, ErrNoAgent) {
		c.tellNoAgent(t, err)
		return nil, t, nil
	}
	if err != nil {
		return nil, nil, err
	}
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	if c.sessions.open == nil {
		c.sessions.open = map[string]*Session{}
	}
	if old := c.sessions.open[name]; old != nil {
		_ = old.Close()
	}
	c.sessions.open[name] = s
	return s, nil, nil
}

func (c *Client) tellNoAgent(t *target, err error) {
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	if c.sessions.told[t.running.UID] != nil {
		return
	}
	if c.sessions.told == nil {
		c.sessions.told = map[types.UID]error{}
	}
	c.sessions.told[t.running.UID] = err
	if c.Notices != nil {
		fmt.Fprintf(c.Notices, "%v: using plain exec, one per operation\n", err)
	}
}

// CloseSessions closes the sessions the client keeps.
func (c *Client) CloseSessions() {
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	for name, s := range c.sessions.open {
		_ = s.Close()
		delete(c.sessions.open, name)
	}
}

// exec runs opts through the session as Exec promises.
func (s *Session) exec(ctx context.Context, opts ExecOptions) (int, error) {
	exit, err := s.Run(ctx, session.RunOptions{
		Command: opts.Command, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
		TTY: opts.TTY, Resize: Sizes(opts.Resize), Timeout: opts.Timeout,
	})
	switch {
	case err != nil:
		return -1, err
	case exit.TimedOut:
		return -1, fmt.Errorf("command did not finish within %s: %w", opts.Timeout, context.DeadlineExceeded)
	case exit.Signal != "":
		return exit.Code, &KilledError{Signal: exit.Signal, Number: exit.Code - 128}
	}
	return exit.Code, nil
}

// fileOr is sessionOr for a file operation on file, with file's absolute
// path inside the workspace.
func (c *Client) fileOr(ctx context.Context, name, file, action string) (*Session, *target, string, error) {
	s, t, err := c.sessionOr(ctx, name, action)
	if err != nil {
		return nil, nil, "", err
	}
	workspace := s.workspaceOr(t)
	abs, err := workspacePath(workspace, file)
	if err != nil {
		return nil, nil, "", err
	}
	return s, t, abs, nil
}

func (s *Session) workspaceOr(t *target) string {
	if s != nil {
		return s.Workspace
	}
	return t.workspace
}

// fileError is the agent's refusal of a file operation as the file
// scripts report theirs: ErrPathEscape for a path that leaves the
// workspace through a symbolic link, ErrTooLarge, and fs errors by errno
// (session.Error's Is).
func fileError(shown string, err error) error {
	var refused *session.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused) && strings.Contains(refused.Message, "path escapes from parent"):
		return fmt.Errorf("%w: %s leaves it through a symbolic link", ErrPathEscape, shown)
	case errors.As(err, &refused) && refused.Errno == "EFBIG", errors.Is(err, session.ErrTooLarge):
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return fmt.Errorf("%s: %w", shown, err)
}

// entryOf is the agent's file information as a DirEntry and FileInfo.
func entryOf(f wire.FileInfo) FileInfo {
	mode := fs.FileMode(f.Mode)
	info := FileInfo{DirEntry: DirEntry{Name: f.Name, Size: f.Size}, Mode: mode, ModTime: f.ModTime}
	switch {
	case mode.IsDir():
		info.Type, info.Size = "dir", 0
	case mode&fs.ModeSymlink != 0:
		info.Type, info.Size = "symlink", 0
	case mode.IsRegular():
		info.Type = "file"
	default:
		info.Type = "other"
	}
	return info
}

// DefaultShell is the terminal session that `agentsandbox attach` and the
// page's terminal make and reattach to when not named another.
const DefaultShell = "shell"

// Shell makes sure a login shell runs in the sandbox as the terminal
// session id, starting one (at size, when given) unless it already runs;
// resumed says it did. The CLI's attach and the page's terminal share it,
// so a shell begun in one is continued in the other.
func (s *Session) Shell(ctx context.Context, id string, size *wire.Size) (resumed bool, err error) {
	running := func() (bool, error) {
		list, err := s.Processes(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range list {
			if p.ID == id && p.Exited == nil {
				return true, nil
			}
		}
		return false, nil
	}
	if resumed, err := running(); err != nil || resumed {
		return resumed, err
	}
	_, err = s.Start(ctx, session.StartOptions{Name: id, Command: []string{"sh", "-c", LoginShell}, TTY: true, Size: size})
	if err != nil {
		// Another client may have started it between the list and the start.
		if again, listErr := running(); listErr == nil && again {
			return true, nil
		}
		return false, err
	}
	return false, nil
}
