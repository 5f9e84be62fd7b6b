// Package agent is the sandbox agent: a small static program present in
// every sandbox pod (the pod's init container copies it into a volume the
// sandbox mounts read-only), run as the sandbox's user with no capability
// of its own. It has no network socket: a client reaches it only through
// an exec of `agentsandbox-agent connect` (so pods/exec, granted to the
// owner alone, stays the one gate), which hands the exec's stdin and
// stdout to the agent's daemon over a Unix socket in the pod's abstract
// namespace (or relays them, where they are not files). The daemon
// outlives its clients, so the processes and terminals it started survive
// a dropped connection, and serves many operations at once over each
// (package session/wire).
//
// The daemon is as trusted as the sandbox's code, which runs as the same
// user and could replace it: it holds nothing the sandbox's code may not
// have, and clients bound what they read from it.
package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

// SocketAddress is the daemon's Unix socket for the current user, in the
// abstract namespace: nothing on the file system (the root may be
// read-only), visible only inside the pod's network namespace, and gone
// with the process.
func SocketAddress() string { return "@agentsandbox-agent-" + strconv.Itoa(os.Getuid()) }

// greetingTimeout bounds the wait for a client's greeting.
const greetingTimeout = 10 * time.Second

// The first byte a connection to the daemon sends says how the session
// reaches it.
const (
	// modeRelay: the session's frames come and go on the connection
	// itself, copied by the connecting process.
	modeRelay byte = 'R'
	// modeHandOver: the byte carries the connecting process's stdin and
	// stdout (SCM_RIGHTS), which the daemon reads and writes itself; the
	// connection stays open, doing nothing, until the session ends.
	modeHandOver byte = 'H'
)

// Connect is `agentsandbox-agent connect`: it connects in and out (an
// exec's stdin and stdout) to the daemon at address, starting the daemon
// (self serve) first when none listens, until either side ends. Where in
// and out are files it hands them to the daemon, so a frame crosses no
// process between the exec stream and the daemon (each hop costs system
// calls a runtime such as gVisor intercepts); otherwise it relays them.
func Connect(in io.Reader, out io.Writer, self, address string) error {
	conn, err := dialOrStart(self, address)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	inFile, isFile := in.(*os.File)
	outFile, bothFiles := out.(*os.File)
	if isFile && bothFiles {
		return handOver(conn, inFile, outFile)
	}
	if _, err := conn.Write([]byte{modeRelay}); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, in)
		// The client is gone (or done): so is this connection, and with
		// it the commands it ran in the foreground.
		_ = conn.Close()
		close(done)
	}()
	_, err = io.Copy(out, conn)
	return err
}

// handOver gives the daemon in and out and waits until it is done with
// them: the exec they belong to lasts as long as this process.
func handOver(conn *net.UnixConn, in, out *os.File) error {
	rights := syscall.UnixRights(int(in.Fd()), int(out.Fd()))
	if _, _, err := conn.WriteMsgUnix([]byte{modeHandOver}, rights, nil); err != nil {
		return fmt.Errorf("handing the exec's stdin and stdout to the sandbox agent: %w", err)
	}
	_, err := io.Copy(io.Discard, conn)
	return err
}

// dialOrStart connects to the daemon, starting it when none answers. Two
// clients that start one at once race for the address; the loser exits,
// and both connect to the winner.
func dialOrStart(self, address string) (*net.UnixConn, error) {
	addr := &net.UnixAddr{Name: address, Net: "unix"}
	if conn, err := net.DialUnix("unix", nil, addr); err == nil {
		return conn, nil
	}
	daemon := exec.Command(self, "serve")
	daemon.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := daemon.Start(); err != nil {
		return nil, fmt.Errorf("starting the sandbox agent: %w", err)
	}
	go func() { _ = daemon.Wait() }()
	var last error
	for range 250 {
		conn, err := net.DialUnix("unix", nil, addr)
		if err == nil {
			return conn, nil
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("the sandbox agent did not answer within 5s: %w", last)
}

// Listen takes the daemon's address; it fails when another daemon has it.
func Listen(address string) (*net.UnixListener, error) {
	return net.ListenUnix("unix", &net.UnixAddr{Name: address, Net: "unix"})
}

// Agent serves sessions: the processes it started and when it last served
// anything are shared by all of them.
type Agent struct {
	procs    *processes
	last     atomic.Int64 // unix nanoseconds
	running  atomic.Int64
	uid      int
	checkUID bool
}

// New returns an agent that serves connections from processes of the
// current user only.
func New() *Agent {
	a := &Agent{procs: newProcesses(), uid: os.Getuid(), checkUID: true}
	a.touch()
	return a
}

func (a *Agent) touch() { a.last.Store(time.Now().UnixNano()) }

// Serve accepts connections on l until ctx ends, each a session.
func (a *Agent) Serve(ctx context.Context, l *net.UnixListener) error {
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if a.checkUID && !a.sameUser(conn) {
			_ = conn.Close()
			continue
		}
		go func() { _ = a.serveConnected(conn) }()
	}
}

// serveConnected serves the session a connecting process brings: on the
// connection itself (relayed), or on the stdin and stdout it handed over,
// closing the connection when the session ends so the process exits.
func (a *Agent) serveConnected(conn *net.UnixConn) error {
	defer func() { _ = conn.Close() }()
	mode := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(2*4))
	_ = conn.SetReadDeadline(time.Now().Add(greetingTimeout))
	n, oobn, _, _, err := conn.ReadMsgUnix(mode, oob)
	if err != nil {
		return fmt.Errorf("no mode from the connecting process: %w", err)
	}
	if n != 1 {
		return errors.New("no mode from the connecting process: it closed the connection")
	}
	_ = conn.SetReadDeadline(time.Time{})
	files, err := receivedFiles(oob[:oobn])
	if err != nil {
		return err
	}
	switch {
	case mode[0] == modeRelay && len(files) == 0:
		return a.ServeConn(conn)
	case mode[0] == modeHandOver && len(files) == 2:
		return a.ServeConn(handedOver{in: files[0], out: files[1]})
	}
	for _, f := range files {
		_ = f.Close()
	}
	return fmt.Errorf("unknown connection mode %q with %d descriptors", mode[0], len(files))
}

// receivedFiles are the descriptors a message carried, made non-blocking
// so that closing one ends a read of it.
func receivedFiles(oob []byte) ([]*os.File, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			_ = syscall.SetNonblock(fd, true)
			files = append(files, os.NewFile(uintptr(fd), "exec-stdio"))
		}
	}
	return files, nil
}

// handedOver is a session on an exec's stdin and stdout, handed over by
// its connecting process.
type handedOver struct{ in, out *os.File }

func (h handedOver) Read(p []byte) (int, error)  { return h.in.Read(p) }
func (h handedOver) Write(p []byte) (int, error) { return h.out.Write(p) }
func (h handedOver) Close() error {
	return errors.Join(h.in.Close(), h.out.Close())
}

// sameUser tells whether the peer runs as the agent's user: another user
// of the pod (there is none in a sandbox made by this project) may not
// drive it. A runtime that cannot tell (SO_PEERCRED unsupported) is
// trusted, as the socket is the pod's alone.
func (a *Agent) sameUser(conn *net.UnixConn) bool {
	raw, err := conn.SyscallConn()
	if err != nil {
		return true
	}
	same := true
	_ = raw.Control(func(fd uintptr) {
		cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err == nil {
			same = int(cred.Uid) == a.uid
		}
	})
	return same
}

// ServeConn speaks the protocol on one connection until it ends: greetings
// first, then one goroutine per stream. Streams of a connection that ends
// end with it; what they started with OpStart lives on.
func (a *Agent) ServeConn(conn io.ReadWriteCloser) error {
	defer func() { _ = conn.Close() }()
	if err := wire.Greet(conn, wire.RoleAgent); err != nil {
		return err
	}
	br := bufio.NewReaderSize(conn, 64)
	greeted := make(chan error, 1)
	go func() { greeted <- wire.ReadGreeting(br, wire.RoleSession) }()
	select {
	case err := <-greeted:
		if err != nil {
			return err
		}
	case <-time.After(greetingTimeout):
		return errors.New("no greeting from the client in time")
	}
	mux, err := yamux.Server(bufferedConn{Reader: br, ReadWriteCloser: conn}, MuxConfig())
	if err != nil {
		return err
	}
	defer func() { _ = mux.Close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		stream, err := mux.AcceptStream()
		if err != nil {
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = stream.Close() }()
			a.handle(stream)
		}()
	}
}

// MuxConfig is yamux's configuration for both ends: no logging (the
// relay's stderr is the client's), and keepalives that notice a dead
// exec stream.
func MuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = io.Discard
	c.EnableKeepAlive = true
	c.KeepAliveInterval = 15 * time.Second
	c.ConnectionWriteTimeout = 30 * time.Second
	return c
}

// bufferedConn reads through the reader that read the greeting, which may
// hold the first bytes of yamux.
type bufferedConn struct {
	io.Reader
	io.ReadWriteCloser
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.Reader.Read(p) }

// handle serves one stream: its Request decides what follows.
func (a *Agent) handle(stream *yamux.Stream) {
	var req wire.Request
	if err := wire.ReadJSON(stream, wire.FrameRequest, &req); err != nil {
		_ = wire.WriteJSON(stream, wire.FrameReply, wire.Reply{Error: "reading the request: " + err.Error()})
		return
	}
	a.touch()
	defer a.touch()
	s := &stream_{Stream: stream}
	switch req.Op {
	case wire.OpRun:
		a.running.Add(1)
		defer a.running.Add(-1)
		a.run(s, req)
	case wire.OpStart:
		s.reply(a.procs.start(req))
	case wire.OpAttach:
		a.running.Add(1)
		defer a.running.Add(-1)
		a.procs.attach(s, req, a.touch)
	case wire.OpOutput:
		s.reply(a.procs.output(req))
	case wire.OpList:
		s.reply(wire.Reply{Processes: a.procs.list()}, nil)
	case wire.OpSignal:
		s.reply(wire.Reply{}, a.procs.signal(req.ID, req.Signal))
	case wire.OpWait:
		s.reply(a.procs.wait(stream, req.ID))
	case wire.OpRead:
		readFile(s, req)
	case wire.OpWrite:
		writeFile(s, req)
	case wire.OpStat:
		s.reply(onFiles(req, stat))
	case wire.OpReadDir:
		s.reply(onFiles(req, readDir))
	case wire.OpMkdir:
		s.reply(onFiles(req, mkdir(req)))
	case wire.OpRemove:
		s.reply(onFiles(req, remove(req)))
	case wire.OpRename:
		s.reply(onFiles(req, rename(req)))
	case wire.OpChmod:
		s.reply(onFiles(req, chmod(req)))
	case wire.OpSymlink:
		s.reply(onFiles(req, symlink(req)))
	case wire.OpWatch:
		watch(s, req)
	case wire.OpDial:
		dial(s, req)
	case wire.OpActivity:
		s.reply(wire.Reply{
			LastActivity: time.Unix(0, a.last.Load()), Running: int(a.running.Load()),
			AgentVersion: strconv.Itoa(wire.Version),
		}, nil)
	default:
		s.reply(wire.Reply{}, fmt.Errorf("unknown operation %q (this agent speaks protocol %d)", req.Op, wire.Version))
	}
}

// stream_ is a stream whose frames may be written from several goroutines.
type stream_ struct {
	*yamux.Stream
	mu sync.Mutex
}

func (s *stream_) frame(t wire.FrameType, payload []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return wire.WriteFrame(s.Stream, t, payload)
}

func (s *stream_) json(t wire.FrameType, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return wire.WriteJSON(s.Stream, t, v)
}

// reply writes the Reply, or the error in its place.
func (s *stream_) reply(r wire.Reply, err error) {
	if err != nil {
		r = failure(err)
	}
	_ = s.json(wire.FrameReply, r)
}

// failure is err as a Reply, with its errno's name when it has one.
func failure(err error) wire.Reply {
	r := wire.Reply{Error: err.Error()}
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		r.Errno = errnoName(errno)
	case errors.Is(err, fs.ErrNotExist):
		r.Errno = "ENOENT"
	case errors.Is(err, fs.ErrExist):
		r.Errno = "EEXIST"
	case errors.Is(err, fs.ErrPermission):
		r.Errno = "EACCES"
	}
	return r
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.EEXIST:
		return "EEXIST"
	case syscall.EACCES, syscall.EPERM:
		return "EACCES"
	case syscall.ENOTDIR:
		return "ENOTDIR"
	case syscall.EISDIR:
		return "EISDIR"
	case syscall.ENOTEMPTY:
		return "ENOTEMPTY"
	case syscall.ENOSPC:
		return "ENOSPC"
	case syscall.EDQUOT:
		return "EDQUOT"
	case syscall.EROFS:
		return "EROFS"
	case syscall.EFBIG:
		return "EFBIG"
	}
	return ""
}

// dataWriter writes what it is given as frames of type t on s.
func dataWriter(s *stream_, t wire.FrameType) io.Writer { return wire.Writer{Send: s.frame, Type: t} }
