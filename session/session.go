// Package session is the client of the sandbox agent (package
// session/agent): one connection, opened once (sandboxclient opens it over
// an exec stream), over which many operations run at once — commands with
// streaming output and their exit, background processes and named
// terminals that outlive the connection, files, watches, TCP dials inside
// the sandbox, and the agent's last activity.
//
// The agent runs as the sandbox's code, so nothing it sends is trusted:
// frames are bounded (wire.MaxPayload) and a file read stops at its limit.
package session

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/agentsandbox/terraform-provider-agentsandbox/session/agent"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

// Session is one connection to a sandbox's agent. Its methods may be
// called from many goroutines at once.
type Session struct {
	mux *yamux.Session
	// root confines the file operations (WithRoot).
	root string
}

// WithRoot is the session with its file operations confined to root: their
// paths are relative to it (or absolute inside it), and none may leave it
// by .. or through a symbolic link. It shares the connection.
func (s *Session) WithRoot(root string) *Session {
	c := *s
	c.root = root
	return &c
}

// greetingTimeout bounds the wait for the agent's greeting: an agent that
// says nothing (or a program that is not one) fails the open, never hangs
// it.
const greetingTimeout = 15 * time.Second

// Open greets the agent at the other end of conn and starts the session.
// An agent of another protocol version fails with a *wire.VersionError.
func Open(conn io.ReadWriteCloser) (*Session, error) {
	// The other end's greeting is read even when ours could not be
	// written: a program that is not the agent (a shell saying there is
	// none) may have said so and gone before our write, and what it said
	// is the error worth reporting, not the broken pipe.
	sent := wire.Greet(conn, wire.RoleSession)
	br := bufio.NewReaderSize(conn, 64)
	greeted := make(chan error, 1)
	go func() { greeted <- wire.ReadGreeting(br, wire.RoleAgent) }()
	var err error
	select {
	case err = <-greeted:
	case <-time.After(greetingTimeout):
		err = fmt.Errorf("the sandbox agent did not greet within %s", greetingTimeout)
	}
	if sent != nil {
		err = errors.Join(err, fmt.Errorf("greeting the sandbox agent: %w", sent))
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	mux, err := yamux.Client(readerConn{Reader: br, ReadWriteCloser: conn}, agent.MuxConfig())
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &Session{mux: mux}, nil
}

type readerConn struct {
	io.Reader
	io.ReadWriteCloser
}

func (r readerConn) Read(p []byte) (int, error) { return r.Reader.Read(p) }

// Close ends the session: commands it runs in the foreground are killed,
// what it started lives on in the sandbox.
func (s *Session) Close() error { return s.mux.Close() }

// Done is closed when the session's connection has ended.
func (s *Session) Done() <-chan struct{} { return s.mux.CloseChan() }

// Error is an operation the agent refused or failed.
type Error struct {
	Op, Path string
	Message  string
	// Errno names the system error (ENOENT, …) when there is one.
	Errno string
}

func (e *Error) Error() string { return e.Message }

// Is lets errors.Is tell a missing file (fs.ErrNotExist), an existing one
// (fs.ErrExist) and a refused one (fs.ErrPermission).
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Errno == "ENOENT"
	case fs.ErrExist:
		return e.Errno == "EEXIST" || e.Errno == "ENOTEMPTY"
	case fs.ErrPermission:
		return e.Errno == "EACCES"
	}
	return false
}

// stream is one operation's stream.
type stream struct {
	*yamux.Stream
	mu sync.Mutex // writes
	// unwatch stops closing the stream when the operation's context ends.
	unwatch func() bool
}

func (st *stream) frame(t wire.FrameType, payload []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return wire.WriteFrame(st.Stream, t, payload)
}

func (st *stream) json(t wire.FrameType, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return st.frame(t, b)
}

// close ends the operation.
func (st *stream) close() {
	st.unwatch()
	_ = st.Close()
}

// open starts an operation: its stream, the request, and the agent's
// Reply. The stream closes when ctx ends, or with st.close.
func (s *Session) open(ctx context.Context, req wire.Request) (*stream, wire.Reply, error) {
	raw, err := s.mux.OpenStream()
	if err != nil {
		return nil, wire.Reply{}, s.ended(err)
	}
	st := &stream{Stream: raw}
	st.unwatch = context.AfterFunc(ctx, func() { _ = raw.Close() })
	var reply wire.Reply
	if err := st.json(wire.FrameRequest, req); err != nil {
		st.close()
		return nil, reply, s.cut(ctx, req, err)
	}
	if err := wire.ReadJSON(raw, wire.FrameReply, &reply); err != nil {
		st.close()
		return nil, reply, s.cut(ctx, req, err)
	}
	if reply.Error != "" {
		st.close()
		return nil, reply, &Error{Op: req.Op, Path: req.Path, Message: reply.Error, Errno: reply.Errno}
	}
	return st, reply, nil
}

// call is an operation that is its Reply.
func (s *Session) call(ctx context.Context, req wire.Request) (wire.Reply, error) {
	st, reply, err := s.open(ctx, req)
	if err != nil {
		return reply, err
	}
	st.close()
	return reply, nil
}

// cut says why an operation's stream failed: the context, or the session.
func (s *Session) cut(ctx context.Context, req wire.Request, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.mux.IsClosed() {
		return s.ended(err)
	}
	return fmt.Errorf("%s: %w", req.Op, err)
}

func (s *Session) ended(err error) error {
	return fmt.Errorf("the session with the sandbox agent has ended: %w", err)
}

// RunOptions describe a command run to its end.
type RunOptions struct {
	Command []string
	Env     []string // KEY=VALUE, over the sandbox's environment
	Dir     string
	Stdin   io.Reader
	// Stdout and Stderr receive the output as it comes (nil discards it);
	// with TTY it all arrives on Stdout.
	Stdout, Stderr io.Writer
	TTY            bool
	Size           *wire.Size
	Resize         <-chan wire.Size
	// Timeout kills the command and everything it started after this long.
	Timeout time.Duration
}

// Run runs a command to its end and says how it ended. Cancelling ctx
// kills the command's whole process group in the sandbox, as does
// Timeout (Exit.TimedOut then).
func (s *Session) Run(ctx context.Context, opts RunOptions) (wire.Exit, error) {
	st, _, err := s.open(ctx, wire.Request{Op: wire.OpRun, Command: opts.Command, Env: opts.Env, Dir: opts.Dir,
		TTY: opts.TTY, Size: opts.Size, Timeout: wire.D(opts.Timeout)})
	if err != nil {
		return wire.Exit{}, err
	}
	defer st.close()
	done := make(chan struct{})
	defer close(done)
	s.feed(st, opts.Stdin, opts.TTY, opts.Resize, done)
	exit, err := output(st, opts.Stdout, opts.Stderr)
	if err != nil {
		return exit, s.cut(ctx, wire.Request{Op: wire.OpRun}, err)
	}
	return exit, nil
}

// feed sends stdin and resizes to an operation's stream until it closes.
// A terminal's end of input is not sent: what ends it is the command. The
// resizes stop when done closes (the operation's end). A Read of stdin
// cannot be interrupted: its goroutine ends at the reader's next data or
// end, whichever comes, as client-go's exec streams do.
func (s *Session) feed(st *stream, stdin io.Reader, tty bool, resize <-chan wire.Size, done <-chan struct{}) {
	if stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := stdin.Read(buf)
				if n > 0 {
					if st.frame(wire.FrameStdin, buf[:n]) != nil {
						return
					}
				}
				if err != nil {
					if !tty {
						_ = st.frame(wire.FrameCloseStdin, nil)
					}
					return
				}
			}
		}()
	} else if !tty {
		_ = st.frame(wire.FrameCloseStdin, nil)
	}
	if resize != nil {
		go func() {
			for {
				select {
				case <-done:
					return
				case size, ok := <-resize:
					if !ok || st.json(wire.FrameResize, size) != nil {
						return
					}
				}
			}
		}()
	}
}

// output writes Stdout and Stderr frames out until the Exit frame.
func output(r io.Reader, stdout, stderr io.Writer) (wire.Exit, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	for {
		t, payload, err := wire.ReadFrame(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return wire.Exit{}, fmt.Errorf("the command's stream ended before its exit status: %w", err)
		}
		switch t {
		case wire.FrameStdout:
			if _, err := stdout.Write(payload); err != nil {
				return wire.Exit{}, err
			}
		case wire.FrameStderr:
			if _, err := stderr.Write(payload); err != nil {
				return wire.Exit{}, err
			}
		case wire.FrameExit:
			var exit wire.Exit
			if err := json.Unmarshal(payload, &exit); err != nil {
				return exit, fmt.Errorf("%w: exit status: %v", wire.ErrMalformed, err)
			}
			return exit, nil
		default:
			return wire.Exit{}, fmt.Errorf("%w: frame type %d in a command's output", wire.ErrMalformed, t)
		}
	}
}

// StartOptions describe a process started in the background, or a named
// terminal session (TTY), that lives until it exits, whoever is connected.
type StartOptions struct {
	// Name names it (unique among running ones); empty: the agent picks.
	Name    string
	Command []string
	Env     []string
	Dir     string
	TTY     bool
	Size    *wire.Size
}

// Start starts a process that outlives the session.
func (s *Session) Start(ctx context.Context, opts StartOptions) (wire.Process, error) {
	reply, err := s.call(ctx, wire.Request{Op: wire.OpStart, Name: opts.Name, Command: opts.Command, Env: opts.Env,
		Dir: opts.Dir, TTY: opts.TTY, Size: opts.Size})
	if err != nil {
		return wire.Process{}, err
	}
	if reply.Process == nil {
		return wire.Process{}, fmt.Errorf("%w: start without a process", wire.ErrMalformed)
	}
	return *reply.Process, nil
}

// Processes lists the started processes, running and recently exited.
func (s *Session) Processes(ctx context.Context) ([]wire.Process, error) {
	reply, err := s.call(ctx, wire.Request{Op: wire.OpList})
	return reply.Processes, err
}

// AttachOptions say where an attach begins and what it carries.
type AttachOptions struct {
	// Offset into the output to begin at; negative: all the agent keeps
	// (a terminal's scrollback).
	Offset int64
	Stdin  io.Reader
	Stdout io.Writer
	Size   *wire.Size
	Resize <-chan wire.Size
}

// Attach streams a started process's output (and Stdin into it) until it
// exits, returning its Exit, or until ctx ends (a detach: nil Exit, and the
// process runs on).
func (s *Session) Attach(ctx context.Context, id string, opts AttachOptions) (*wire.Exit, error) {
	st, reply, err := s.open(ctx, wire.Request{Op: wire.OpAttach, ID: id, Offset: opts.Offset, Size: opts.Size})
	if err != nil {
		return nil, err
	}
	defer st.close()
	tty := reply.Process != nil && reply.Process.TTY
	done := make(chan struct{})
	defer close(done)
	s.feed(st, opts.Stdin, tty, opts.Resize, done)
	exit, err := output(st, opts.Stdout, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, s.cut(ctx, wire.Request{Op: wire.OpAttach}, err)
	}
	return &exit, nil
}

// Output reads a started process's output from offset, once: the bytes,
// the offset to ask from next, and the process.
func (s *Session) Output(ctx context.Context, id string, offset int64) ([]byte, int64, wire.Process, error) {
	reply, err := s.call(ctx, wire.Request{Op: wire.OpOutput, ID: id, Offset: offset})
	if err != nil || reply.Process == nil {
		return nil, offset, wire.Process{}, err
	}
	return reply.Output, reply.Offset, *reply.Process, nil
}

// Signal sends a signal ("TERM", "KILL", "INT", or a number) to a
// started process's whole group.
func (s *Session) Signal(ctx context.Context, id, signal string) error {
	_, err := s.call(ctx, wire.Request{Op: wire.OpSignal, ID: id, Signal: signal})
	return err
}

// Wait waits until a started process has exited.
func (s *Session) Wait(ctx context.Context, id string) (wire.Process, error) {
	reply, err := s.call(ctx, wire.Request{Op: wire.OpWait, ID: id})
	if err != nil || reply.Process == nil {
		return wire.Process{}, err
	}
	return *reply.Process, nil
}

// ErrTooLarge is a file larger than the limit it was read with.
var ErrTooLarge = errors.New("file larger than the limit")

// ReadFile copies a regular file of the sandbox to w, refusing one larger
// than limit bytes (0: no limit), and returns what it copied.
func (s *Session) ReadFile(ctx context.Context, path string, w io.Writer, limit int64) (wire.FileInfo, int64, error) {
	st, reply, err := s.open(ctx, wire.Request{Op: wire.OpRead, Root: s.root, Path: path, Limit: limit})
	if err != nil {
		return wire.FileInfo{}, 0, err
	}
	defer st.close()
	var info wire.FileInfo
	if reply.File != nil {
		info = *reply.File
	}
	var copied int64
	for {
		t, payload, err := wire.ReadFrame(st)
		if err != nil {
			return info, copied, s.cut(ctx, wire.Request{Op: wire.OpRead}, err)
		}
		switch t {
		case wire.FrameData:
			if limit > 0 && copied+int64(len(payload)) > limit {
				return info, copied, fmt.Errorf("%s grew past the limit of %d bytes while read: %w", path, limit, ErrTooLarge)
			}
			if _, err := w.Write(payload); err != nil {
				return info, copied, err
			}
			copied += int64(len(payload))
		case wire.FrameEnd:
			if len(payload) > 0 {
				return info, copied, &Error{Op: wire.OpRead, Path: path, Message: string(payload)}
			}
			return info, copied, nil
		default:
			return info, copied, fmt.Errorf("%w: frame type %d in a file", wire.ErrMalformed, t)
		}
	}
}

// WriteFile replaces a file of the sandbox with r's bytes, atomically: a
// reader there sees the old file or the new one, and a write cut short
// leaves the old one. Mode 0 is 0644.
func (s *Session) WriteFile(ctx context.Context, path string, r io.Reader, mode fs.FileMode) (wire.FileInfo, error) {
	raw, err := s.mux.OpenStream()
	if err != nil {
		return wire.FileInfo{}, s.ended(err)
	}
	st := &stream{Stream: raw}
	defer context.AfterFunc(ctx, func() { _ = raw.Close() })()
	defer func() { _ = raw.Close() }()
	req := wire.Request{Op: wire.OpWrite, Root: s.root, Path: path, Mode: uint32(mode.Perm())}
	if err := st.json(wire.FrameRequest, req); err != nil {
		return wire.FileInfo{}, s.cut(ctx, req, err)
	}
	// The agent answers only after End; a refusal it found at once (a
	// missing directory) it answers then too, having read the rest.
	if _, err := io.Copy(wire.Writer{Send: st.frame, Type: wire.FrameData}, r); err != nil {
		return wire.FileInfo{}, s.cut(ctx, req, err)
	}
	if err := st.frame(wire.FrameEnd, nil); err != nil {
		return wire.FileInfo{}, s.cut(ctx, req, err)
	}
	var reply wire.Reply
	if err := wire.ReadJSON(raw, wire.FrameReply, &reply); err != nil {
		return wire.FileInfo{}, s.cut(ctx, req, err)
	}
	if reply.Error != "" {
		return wire.FileInfo{}, &Error{Op: req.Op, Path: path, Message: reply.Error, Errno: reply.Errno}
	}
	if reply.File == nil {
		return wire.FileInfo{}, nil
	}
	return *reply.File, nil
}

// Stat describes a file without following a final symlink.
func (s *Session) Stat(ctx context.Context, path string) (wire.FileInfo, error) {
	reply, err := s.call(ctx, wire.Request{Op: wire.OpStat, Root: s.root, Path: path})
	if err != nil || reply.File == nil {
		return wire.FileInfo{}, err
	}
	return *reply.File, nil
}

// ReadDir lists a directory.
func (s *Session) ReadDir(ctx context.Context, path string) ([]wire.FileInfo, error) {
	reply, err := s.call(ctx, wire.Request{Op: wire.OpReadDir, Root: s.root, Path: path})
	return reply.Entries, err
}

// Mkdir makes a directory, and with parents its missing parents.
func (s *Session) Mkdir(ctx context.Context, path string, mode fs.FileMode, parents bool) error {
	_, err := s.call(ctx, wire.Request{Op: wire.OpMkdir, Root: s.root, Path: path, Mode: uint32(mode.Perm()), Recursive: parents})
	return err
}

// Remove removes a file or an empty directory, or with recursive a tree.
func (s *Session) Remove(ctx context.Context, path string, recursive bool) error {
	_, err := s.call(ctx, wire.Request{Op: wire.OpRemove, Root: s.root, Path: path, Recursive: recursive})
	return err
}

// Rename renames from to to, replacing an existing to only with replace.
func (s *Session) Rename(ctx context.Context, from, to string, replace bool) error {
	_, err := s.call(ctx, wire.Request{Op: wire.OpRename, Root: s.root, Path: from, To: to, Replace: replace})
	return err
}

// Chmod sets a file's permission bits.
func (s *Session) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	_, err := s.call(ctx, wire.Request{Op: wire.OpChmod, Root: s.root, Path: path, Mode: uint32(mode.Perm())})
	return err
}

// Symlink makes a symbolic link at link holding target.
func (s *Session) Symlink(ctx context.Context, target, link string) error {
	_, err := s.call(ctx, wire.Request{Op: wire.OpSymlink, Root: s.root, Path: link, Target: target})
	return err
}

// Watch calls each with every change under dir, nested directories
// included, until ctx ends (then it returns nil) or each returns false.
func (s *Session) Watch(ctx context.Context, dir string, each func(wire.Event) bool) error {
	st, _, err := s.open(ctx, wire.Request{Op: wire.OpWatch, Root: s.root, Path: dir})
	if err != nil {
		return err
	}
	defer st.close()
	for {
		var ev wire.Event
		if err := wire.ReadJSON(st, wire.FrameEvent, &ev); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return s.cut(ctx, wire.Request{Op: wire.OpWatch}, err)
		}
		if !each(ev) {
			return nil
		}
	}
}

// Dial connects to a TCP port on the sandbox's loopback, through the
// agent: it works whatever the runtime (gVisor's pods cannot be
// port-forwarded by the kubelet).
func (s *Session) Dial(ctx context.Context, port int) (net.Conn, error) {
	st, _, err := s.open(ctx, wire.Request{Op: wire.OpDial, Port: port})
	if err != nil {
		return nil, err
	}
	// The connection outlives ctx, which bounded the dial only.
	st.unwatch()
	return st.Stream, nil
}

// Activity is what the agent says of its use: when it last served a
// client, and how many foreground commands and attached clients it has now.
type Activity struct {
	Last    time.Time
	Running int
}

// Activity asks the agent when it was last used.
func (s *Session) Activity(ctx context.Context) (Activity, error) {
	reply, err := s.call(ctx, wire.Request{Op: wire.OpActivity})
	return Activity{Last: reply.LastActivity, Running: reply.Running}, err
}
