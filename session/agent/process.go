package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

// outputDrain is how long, after a command exits, its output is still
// read: what it wrote just before exiting is in the pipe or the terminal,
// and a child it left behind may hold the pipe open for ever.
const outputDrain = 2 * time.Second

// command builds the process req asks for, in a process group of its own
// (with a terminal: a session of its own, the terminal its controlling
// one), so that a signal or a kill reaches everything it started.
func command(req wire.Request) (*exec.Cmd, error) {
	if len(req.Command) == 0 {
		return nil, errors.New("no command given")
	}
	cmd := exec.Command(req.Command[0], req.Command[1:]...)
	cmd.Dir = req.Dir
	cmd.Env = append(os.Environ(), req.Env...)
	if req.TTY {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if !hasEnv(req.Env, "TERM") {
			cmd.Env = append(cmd.Env, "TERM=xterm-256color")
		}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	return cmd, nil
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

// killGroup kills the process group led by pid.
func killGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

// exitOf is how a waited-for command ended; a start that failed is a
// shell's 127 (not found) or 126 (not runnable), with the reason on stderr.
func exitOf(state *os.ProcessState) wire.Exit {
	status, ok := state.Sys().(syscall.WaitStatus)
	if ok && status.Signaled() {
		return wire.Exit{Code: 128 + int(status.Signal()), Signal: signalName(status.Signal())}
	}
	return wire.Exit{Code: state.ExitCode()}
}

func startFailure(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return 127
	}
	return 126
}

// run runs req's command to its end, streaming: stdout and stderr (one
// stream with a terminal) as frames, the client's stdin, resizes and
// signals into it, and its Exit last. A client that goes away first, and
// the Timeout, kill its whole process group.
func (a *Agent) run(s *stream_, req wire.Request) {
	cmd, err := command(req)
	if err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	var (
		terminal *os.File
		stdin    io.WriteCloser
		outputs  sync.WaitGroup
	)
	// The Reply first: output may come as soon as the command starts.
	s.reply(wire.Reply{}, nil)
	if req.TTY {
		terminal, err = pty.StartWithAttrs(cmd, ptySize(req.Size), cmd.SysProcAttr)
		if err == nil {
			stdin = terminal
			outputs.Add(1)
			go func() {
				defer outputs.Done()
				_, _ = io.Copy(dataWriter(s, wire.FrameStdout), terminal)
			}()
		}
	} else {
		cmd.Stdout, cmd.Stderr = dataWriter(s, wire.FrameStdout), dataWriter(s, wire.FrameStderr)
		cmd.WaitDelay = outputDrain
		var pipe io.WriteCloser
		if pipe, err = cmd.StdinPipe(); err == nil {
			stdin = pipe
			err = cmd.Start()
		}
	}
	if err != nil {
		// As a shell says it.
		why := err.Error()
		if startFailure(err) == 127 {
			why = "command not found"
		}
		_, _ = dataWriter(s, wire.FrameStderr).Write([]byte(req.Command[0] + ": " + why + "\n"))
		_ = s.json(wire.FrameExit, wire.Exit{Code: startFailure(err)})
		return
	}
	pid := cmd.Process.Pid

	var timedOut atomic.Bool
	if t := req.Timeout.Std(); t > 0 {
		timer := time.AfterFunc(t, func() {
			timedOut.Store(true)
			killGroup(pid, syscall.SIGKILL)
		})
		defer timer.Stop()
	}
	exited := make(chan struct{})
	go func() {
		input(s.Stream, stdin, terminal, func(sig syscall.Signal) { killGroup(pid, sig) }, a.touch)
		select {
		case <-exited:
		default:
			// The stream ended before the command: its client is gone.
			killGroup(pid, syscall.SIGKILL)
		}
	}()
	waitErr := cmd.Wait()
	close(exited)
	if terminal != nil {
		drainTerminal(terminal, &outputs)
	}
	exit := wire.Exit{Code: -1}
	if cmd.ProcessState != nil {
		exit = exitOf(cmd.ProcessState)
	} else if waitErr != nil {
		exit.Code = 1
	}
	exit.TimedOut = timedOut.Load()
	_ = s.json(wire.FrameExit, exit)
}

// drainTerminal reads what the command left in its terminal, then closes
// it: the read ends by itself once no process holds the terminal, or
// after outputDrain when one still does.
func drainTerminal(terminal *os.File, outputs *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		outputs.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(outputDrain):
	}
	_ = terminal.Close()
	outputs.Wait()
}

// input feeds a stream's client frames into a process until the stream
// ends: stdin bytes and its end, terminal resizes, signals to its group.
func input(r io.Reader, stdin io.WriteCloser, terminal *os.File, signal func(syscall.Signal), touch func()) {
	for {
		t, payload, err := wire.ReadFrame(r)
		if err != nil {
			return
		}
		touch()
		switch t {
		case wire.FrameStdin:
			if stdin != nil {
				_, _ = stdin.Write(payload)
			}
		case wire.FrameCloseStdin:
			// A terminal's input has no end of its own (closing it would
			// hang the command up): what ends it is the command's exit.
			if stdin != nil && terminal == nil {
				_ = stdin.Close()
			}
		case wire.FrameResize:
			var size wire.Size
			if terminal != nil && json.Unmarshal(payload, &size) == nil {
				_ = pty.Setsize(terminal, ptySize(&size))
			}
		case wire.FrameSignal:
			var name string
			if json.Unmarshal(payload, &name) == nil {
				if sig, ok := signalNumber(name); ok {
					signal(sig)
				}
			}
		}
	}
}

func ptySize(s *wire.Size) *pty.Winsize {
	if s == nil || s.Cols == 0 || s.Rows == 0 {
		return &pty.Winsize{Cols: 80, Rows: 24}
	}
	return &pty.Winsize{Cols: s.Cols, Rows: s.Rows}
}

// signalName is a signal's name without SIG ("KILL").
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return strconv.Itoa(int(sig))
}

// signalNumber parses "TERM", "SIGTERM" or "15".
func signalNumber(name string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	name = strings.ToUpper(name)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(name)
	return sig, sig != 0
}

// maxScrollback is how much of a started process's output the agent keeps.
const maxScrollback = 1 << 20

// maxExited is how many exited processes the agent still lists.
const maxExited = 32

// processes are the processes started with OpStart, by ID.
type processes struct {
	mu    sync.Mutex
	byID  map[string]*process
	count int
}

func newProcesses() *processes { return &processes{byID: map[string]*process{}} }

// process is a started process and what it has written.
type process struct {
	id       string
	command  []string
	tty      bool
	pid      int
	started  time.Time
	cmd      *exec.Cmd
	terminal *os.File
	stdin    io.WriteCloser

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced at each output and at exit
	out      []byte        // the last maxScrollback bytes of output
	dropped  int64         // bytes before out no longer kept
	exited   *wire.Exit
	ended    time.Time
	attached int
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out = append(p.out, b...)
	if over := len(p.out) - maxScrollback; over > 0 {
		p.out = append(p.out[:0:0], p.out[over:]...)
		p.dropped += int64(over)
	}
	p.notify()
	return len(b), nil
}

// notify wakes whoever waits for news; held p.mu.
func (p *process) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *process) info() wire.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return wire.Process{ID: p.id, Command: p.command, TTY: p.tty, PID: p.pid, Started: p.started,
		Exited: p.exited, Output: p.dropped + int64(len(p.out)), Attached: p.attached}
}

// since is the output from offset on (a negative offset: all that is
// kept), the offset after it, what was dropped before it, and a channel
// closed at the next news.
func (p *process) since(offset int64) (out []byte, next, dropped int64, exited *wire.Exit, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	end := p.dropped + int64(len(p.out))
	if offset < 0 || offset < p.dropped {
		if offset >= 0 {
			dropped = p.dropped - offset
		}
		offset = p.dropped
	}
	offset = min(offset, end)
	out = append([]byte(nil), p.out[offset-p.dropped:]...)
	return out, end, dropped, p.exited, p.changed
}

func (ps *processes) start(req wire.Request) (wire.Reply, error) {
	cmd, err := command(req)
	if err != nil {
		return wire.Reply{}, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	id := req.Name
	if id == "" {
		ps.count++
		id = "p" + strconv.Itoa(ps.count)
		for ps.byID[id] != nil {
			ps.count++
			id = "p" + strconv.Itoa(ps.count)
		}
	}
	if old := ps.byID[id]; old != nil && old.info().Exited == nil {
		return wire.Reply{}, fmt.Errorf("a process named %s is running (pid %d)", id, old.pid)
	}
	p := &process{id: id, command: req.Command, tty: req.TTY, changed: make(chan struct{}), cmd: cmd}
	if req.TTY {
		p.terminal, err = pty.StartWithAttrs(cmd, ptySize(req.Size), cmd.SysProcAttr)
		p.stdin = p.terminal
	} else {
		cmd.Stdout, cmd.Stderr = p, p
		cmd.WaitDelay = outputDrain
		if p.stdin, err = cmd.StdinPipe(); err == nil {
			err = cmd.Start()
		}
	}
	if err != nil {
		return wire.Reply{}, fmt.Errorf("starting %s: %w", req.Command[0], err)
	}
	p.pid, p.started = cmd.Process.Pid, time.Now()
	ps.byID[id] = p
	go p.wait()
	ps.forgetOldest()
	info := p.info()
	return wire.Reply{Process: &info}, nil
}

// wait reaps the process and records how it ended.
func (p *process) wait() {
	var outputs sync.WaitGroup
	if p.terminal != nil {
		outputs.Add(1)
		go func() {
			defer outputs.Done()
			_, _ = io.Copy(p, p.terminal)
		}()
	}
	_ = p.cmd.Wait()
	if p.terminal != nil {
		drainTerminal(p.terminal, &outputs)
	}
	exit := exitOf(p.cmd.ProcessState)
	p.mu.Lock()
	p.exited, p.ended = &exit, time.Now()
	p.notify()
	p.mu.Unlock()
}

// forgetOldest drops the oldest exited processes beyond maxExited; held
// ps.mu.
func (ps *processes) forgetOldest() {
	var exited []*process
	for _, p := range ps.byID {
		p.mu.Lock()
		if p.exited != nil {
			exited = append(exited, p)
		}
		p.mu.Unlock()
	}
	if len(exited) <= maxExited {
		return
	}
	sort.Slice(exited, func(i, j int) bool { return exited[i].ended.Before(exited[j].ended) })
	for _, p := range exited[:len(exited)-maxExited] {
		delete(ps.byID, p.id)
	}
}

func (ps *processes) get(id string) (*process, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.byID[id]
	if p == nil {
		return nil, fmt.Errorf("no process %q in this sandbox (list them with ps)", id)
	}
	return p, nil
}

func (ps *processes) list() []wire.Process {
	ps.mu.Lock()
	all := make([]*process, 0, len(ps.byID))
	for _, p := range ps.byID {
		all = append(all, p)
	}
	ps.mu.Unlock()
	infos := make([]wire.Process, 0, len(all))
	for _, p := range all {
		infos = append(infos, p.info())
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Started.Before(infos[j].Started) })
	return infos
}

func (ps *processes) output(req wire.Request) (wire.Reply, error) {
	p, err := ps.get(req.ID)
	if err != nil {
		return wire.Reply{}, err
	}
	out, next, dropped, _, _ := p.since(req.Offset)
	if keep := wire.MaxPayload / 2; len(out) > keep {
		// The Reply is JSON (base64): keep it within a frame; the client
		// asks again from next.
		next -= int64(len(out) - keep)
		out = out[:keep]
	}
	info := p.info()
	return wire.Reply{Process: &info, Output: out, Offset: next, Dropped: dropped}, nil
}

func (ps *processes) signal(id, name string) error {
	p, err := ps.get(id)
	if err != nil {
		return err
	}
	sig, ok := signalNumber(name)
	if !ok {
		return fmt.Errorf("unknown signal %q (want a name such as TERM or KILL, or a number)", name)
	}
	killGroup(p.pid, sig)
	return nil
}

// wait replies once the process has exited, or when the client leaves.
func (ps *processes) wait(client io.Reader, id string) (wire.Reply, error) {
	p, err := ps.get(id)
	if err != nil {
		return wire.Reply{}, err
	}
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, client)
		close(gone)
	}()
	for {
		_, _, _, exited, changed := p.since(-1)
		if exited != nil {
			info := p.info()
			return wire.Reply{Process: &info}, nil
		}
		select {
		case <-changed:
		case <-gone:
			return wire.Reply{}, errors.New("the client left")
		}
	}
}

// attach streams a started process's output from req.Offset as Stdout
// frames, and the client's input into it, until the process exits (then an
// Exit frame) or the client detaches by closing the stream; the process
// runs on either way.
func (ps *processes) attach(s *stream_, req wire.Request, touch func()) {
	p, err := ps.get(req.ID)
	if err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	p.mu.Lock()
	p.attached++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.attached--
		p.mu.Unlock()
	}()
	if req.Size != nil && p.terminal != nil {
		_ = pty.Setsize(p.terminal, ptySize(req.Size))
	}
	info := p.info()
	s.reply(wire.Reply{Process: &info}, nil)
	detached := make(chan struct{})
	go func() {
		input(s.Stream, p.stdin, p.terminal, func(sig syscall.Signal) { killGroup(p.pid, sig) }, touch)
		close(detached)
	}()
	offset := req.Offset
	for {
		out, next, _, exited, changed := p.since(offset)
		if len(out) > 0 {
			if _, err := dataWriter(s, wire.FrameStdout).Write(out); err != nil {
				return
			}
		}
		offset = next
		if exited != nil {
			_ = s.json(wire.FrameExit, *exited)
			return
		}
		select {
		case <-changed:
		case <-detached:
			return
		}
	}
}
