// Package wire is the protocol between a client's session
// (sandboxclient.Session) and the sandbox agent (package session/agent),
// spoken over one exec stream: a greeting line each way that names the
// protocol's version, then yamux, one stream per operation. On a stream the
// client's first frame is a Request; the agent answers with a Reply and,
// for the operations that stream, more frames (output, events, an Exit).
//
// Neither side trusts the other's bytes: the agent runs as the sandbox's
// code and may be replaced by it, so a client bounds every frame it reads
// (MaxPayload) and every greeting; the agent bounds what clients send the
// same way.
package wire

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Version is the protocol version this build speaks. Both sides must
// speak the same one; a mismatch is said in both directions, never waited
// out.
const Version = 1

// The two greetings' first words: a session (the client) and an agent.
const (
	RoleSession = "agentsandbox-session"
	RoleAgent   = "agentsandbox-agent"
)

// maxGreeting bounds a greeting line: "agentsandbox-session 123\n" and room.
const maxGreeting = 64

// Greet writes the greeting of role at this build's Version.
func Greet(w io.Writer, role string) error {
	_, err := fmt.Fprintf(w, "%s %d\n", role, Version)
	return err
}

// VersionError is a peer that speaks another version of the protocol.
type VersionError struct {
	// Role is the peer's.
	Role         string
	Theirs, Ours int
}

func (e *VersionError) Error() string {
	older := "this client"
	if e.Theirs < e.Ours {
		older = "the " + strings.TrimPrefix(e.Role, "agentsandbox-")
	}
	return fmt.Sprintf("%s speaks session protocol %d and this side %d: %s is older; "+
		"update it (the agent comes with the reconciler's --egress-gate-image, the client with this release)",
		e.Role, e.Theirs, e.Ours, older)
}

// ReadGreeting reads the peer's greeting, which must be role's, and fails
// with a *VersionError when it speaks another version. It reads at most
// one short line, so a peer that says something else fails fast instead of
// being read forever.
func ReadGreeting(r *bufio.Reader, role string) error {
	var line []byte
	for len(line) < maxGreeting {
		b, err := r.ReadByte()
		if err != nil {
			if len(line) == 0 {
				return fmt.Errorf("no greeting from the %s: %w", role, err)
			}
			return fmt.Errorf("greeting from the %s cut short after %q: %w", role, line, err)
		}
		if b == '\n' {
			return checkGreeting(string(line), role)
		}
		line = append(line, b)
	}
	return fmt.Errorf("the %s's greeting is longer than %d bytes: %q…", role, maxGreeting, line)
}

func checkGreeting(line, role string) error {
	who, version, ok := strings.Cut(line, " ")
	if !ok || who != role {
		return fmt.Errorf("expected the greeting of an %s, got %q", role, line)
	}
	n, err := strconv.Atoi(version)
	if err != nil || n < 0 {
		return fmt.Errorf("the %s's greeting has no version number: %q", role, line)
	}
	if n != Version {
		return &VersionError{Role: role, Theirs: n, Ours: Version}
	}
	return nil
}

// FrameType says what a frame carries.
type FrameType byte

// The frames. Request and Reply carry JSON (Request, Reply); Exit, Resize,
// Signal and Event JSON too; the others bytes.
const (
	FrameRequest FrameType = iota + 1
	FrameReply
	FrameStdin
	FrameCloseStdin
	FrameStdout
	FrameStderr
	FrameExit
	FrameResize
	FrameSignal
	FrameEvent
	FrameData
	FrameEnd
	frameLimit
)

// MaxPayload bounds a frame's payload: writers split what is larger.
const MaxPayload = 256 << 10

// headerSize is a frame's type and length.
const headerSize = 5

// WriteFrame writes one frame. Callers that write from several goroutines
// on one stream hold a lock around it.
func WriteFrame(w io.Writer, t FrameType, payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("frame of %d bytes is larger than %d", len(payload), MaxPayload)
	}
	buf := make([]byte, headerSize+len(payload))
	buf[0] = byte(t)
	binary.BigEndian.PutUint32(buf[1:headerSize], uint32(len(payload)))
	copy(buf[headerSize:], payload)
	_, err := w.Write(buf)
	return err
}

// Writer writes what it is given as frames of Type through Send, split to
// fit MaxPayload: a process's output, a file's bytes.
type Writer struct {
	Send func(FrameType, []byte) error
	Type FrameType
}

func (w Writer) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), MaxPayload)
		if err := w.Send(w.Type, p[:n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// WriteJSON writes v as a frame of type t.
func WriteJSON(w io.Writer, t FrameType, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteFrame(w, t, b)
}

// ErrMalformed is a frame no writer of this protocol writes.
var ErrMalformed = errors.New("malformed frame")

// ReadFrame reads one frame. It never allocates more than MaxPayload for a
// frame, whatever its header claims.
func ReadFrame(r io.Reader) (FrameType, []byte, error) {
	var header [headerSize]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return 0, nil, err
	}
	t := FrameType(header[0])
	n := binary.BigEndian.Uint32(header[1:])
	if t == 0 || t >= frameLimit {
		return 0, nil, fmt.Errorf("%w: type %d", ErrMalformed, header[0])
	}
	if n > MaxPayload {
		return 0, nil, fmt.Errorf("%w: %d bytes of payload, more than %d", ErrMalformed, n, MaxPayload)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, fmt.Errorf("frame cut short: %w", noEOF(err))
	}
	return t, payload, nil
}

// noEOF turns an EOF inside a frame into ErrUnexpectedEOF: only an EOF
// between frames is a clean end.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadJSON reads a frame that must be of type want and decodes it into v.
func ReadJSON(r io.Reader, want FrameType, v any) error {
	t, payload, err := ReadFrame(r)
	if err != nil {
		return err
	}
	if t != want {
		return fmt.Errorf("%w: a frame of type %d where %d belongs", ErrMalformed, t, want)
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// The operations.
const (
	OpRun      = "run"      // run a command to its end, streaming (Exit ends it)
	OpStart    = "start"    // start a background process or named terminal session
	OpAttach   = "attach"   // stream a started process's output from an offset, and its input
	OpOutput   = "output"   // read a started process's output from an offset, once
	OpList     = "list"     // the started processes
	OpSignal   = "signal"   // signal a started process's group
	OpWait     = "wait"     // reply when a started process has exited
	OpRead     = "read"     // a file's bytes: Data frames, then End
	OpWrite    = "write"    // replace a file atomically with the Data frames sent, up to End
	OpStat     = "stat"     // one file's information
	OpReadDir  = "readdir"  // a directory's entries
	OpMkdir    = "mkdir"    // make a directory (and its parents)
	OpRemove   = "remove"   // remove a file or an empty directory (or a tree, with Recursive)
	OpRename   = "rename"   // rename, refusing to replace unless Replace
	OpChmod    = "chmod"    // change a file's permission bits
	OpSymlink  = "symlink"  // make a symbolic link at Path holding Target
	OpWatch    = "watch"    // Event frames for changes under a directory, recursively
	OpDial     = "dial"     // after the Reply, the stream carries a TCP connection's bytes
	OpActivity = "activity" // when the agent last served anything, and what runs now
)

// Request is a stream's first frame.
type Request struct {
	Op string `json:"op"`
	// Run and start.
	Command []string `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"` // KEY=VALUE, over the container's environment
	Dir     string   `json:"dir,omitempty"`
	TTY     bool     `json:"tty,omitempty"`
	Size    *Size    `json:"size,omitempty"`
	// Timeout kills the command's process group after this long (run).
	Timeout Duration `json:"timeout,omitempty"`
	// Name names a started process (start; unique among running ones).
	Name string `json:"name,omitempty"`
	// ID is a started process's name (attach, output, signal, wait).
	ID string `json:"id,omitempty"`
	// Offset is where in a process's output to begin (attach, output);
	// negative: as far back as the agent keeps.
	Offset int64  `json:"offset,omitempty"`
	Signal string `json:"signal,omitempty"`
	// Files. With Root, Path and To are inside it (relative, or absolute
	// under it) and no path may leave it, by .. or a symbolic link;
	// without, Path and To are absolute.
	Root      string `json:"root,omitempty"`
	Path      string `json:"path,omitempty"`
	To        string `json:"to,omitempty"`
	Mode      uint32 `json:"mode,omitempty"` // permission bits
	Replace   bool   `json:"replace,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	Limit     int64  `json:"limit,omitempty"` // read: refuse a file larger than this (0: no limit)
	// Target is a symbolic link's text (symlink); it is not checked
	// against Root, which no later operation follows a link out of.
	Target string `json:"target,omitempty"`
	// Port is the TCP port on the sandbox's loopback to dial.
	Port int `json:"port,omitempty"`
}

// Duration is a time.Duration that travels as milliseconds.
type Duration int64

// D is d as a Duration.
func D(d time.Duration) Duration { return Duration(d / time.Millisecond) }

// Std is the Duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) * time.Millisecond }

// Size is a terminal's size.
type Size struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// Reply answers a Request. Error is set when the operation failed, with
// Errno the error's name where it has one (ENOENT, EEXIST, …) so that the
// client can tell a missing file from a refused one.
type Reply struct {
	Error string `json:"error,omitempty"`
	Errno string `json:"errno,omitempty"`

	Process   *Process   `json:"process,omitempty"`
	Processes []Process  `json:"processes,omitempty"`
	File      *FileInfo  `json:"file,omitempty"`
	Entries   []FileInfo `json:"entries,omitempty"`
	// Output and Offset: bytes of a process's output and the offset after
	// them (output); Dropped: how many bytes before them the agent no
	// longer keeps.
	Output  []byte `json:"output,omitempty"`
	Offset  int64  `json:"offset,omitempty"`
	Dropped int64  `json:"dropped,omitempty"`
	// Activity.
	LastActivity time.Time `json:"lastActivity,omitzero"`
	Running      int       `json:"running,omitempty"`
	AgentVersion string    `json:"agentVersion,omitempty"`
}

// Process is a started process, running or exited.
type Process struct {
	ID      string    `json:"id"`
	Command []string  `json:"command"`
	TTY     bool      `json:"tty,omitempty"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Exited  *Exit     `json:"exited,omitempty"`
	// Output is how many bytes of output it has written.
	Output int64 `json:"output"`
	// Attached is how many clients are attached now.
	Attached int `json:"attached,omitempty"`
}

// Exit is how a process ended.
type Exit struct {
	// Code is the exit code, 128+N for signal N as a shell reports it.
	Code int `json:"code"`
	// Signal names the signal that killed it ("KILL"), if one did.
	Signal string `json:"signal,omitempty"`
	// TimedOut: the Request's Timeout killed it.
	TimedOut bool `json:"timedOut,omitempty"`
}

// FileInfo describes a file.
type FileInfo struct {
	Name    string    `json:"name"`
	Mode    uint32    `json:"mode"` // os.FileMode bits, type included
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
	Link    string    `json:"link,omitempty"` // a symlink's target
}

// Event is a change under a watched directory.
type Event struct {
	// Op is create, write, remove, rename or chmod.
	Op   string `json:"op"`
	Path string `json:"path"`
}
