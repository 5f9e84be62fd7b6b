package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

func fileInfo(name string, fi fs.FileInfo, link string) wire.FileInfo {
	return wire.FileInfo{Name: name, Mode: uint32(fi.Mode()), Size: fi.Size(), ModTime: fi.ModTime(), Link: link}
}

// within opens the file system a request works in and returns its paths
// relative to it: req.Root, which no path may leave (os.Root refuses ..
// and symbolic links that lead out), or the whole file system.
func within(req wire.Request) (*os.Root, string, string, error) {
	root := req.Root
	if root == "" {
		root = "/"
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, "", "", err
	}
	rel := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		if !filepath.IsAbs(p) {
			return filepath.Clean(p), nil
		}
		inside, err := filepath.Rel(filepath.Clean(root), filepath.Clean(p))
		if err != nil || inside == ".." || strings.HasPrefix(inside, "../") {
			return "", fmt.Errorf("%s is outside %s", p, root)
		}
		return inside, nil
	}
	path, err := rel(req.Path)
	if err != nil {
		_ = r.Close()
		return nil, "", "", err
	}
	if path == "" {
		_ = r.Close()
		return nil, "", "", errBadPath
	}
	to, err := rel(req.To)
	if err != nil {
		_ = r.Close()
		return nil, "", "", err
	}
	return r, path, to, nil
}

// onFiles runs op in the request's file system.
func onFiles(req wire.Request, op func(r *os.Root, path, to string) (wire.Reply, error)) (wire.Reply, error) {
	r, path, to, err := within(req)
	if err != nil {
		return wire.Reply{}, err
	}
	defer func() { _ = r.Close() }()
	return op(r, path, to)
}

// stat describes one file without following a final symlink.
func stat(r *os.Root, path, _ string) (wire.Reply, error) {
	fi, err := r.Lstat(path)
	if err != nil {
		return wire.Reply{}, err
	}
	link, _ := r.Readlink(path)
	info := fileInfo(filepath.Base(path), fi, link)
	return wire.Reply{File: &info}, nil
}

func readDir(r *os.Root, path, _ string) (wire.Reply, error) {
	dir, err := r.Open(path)
	if err != nil {
		return wire.Reply{}, err
	}
	defer func() { _ = dir.Close() }()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return wire.Reply{}, err
	}
	out := make([]wire.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // gone since the read
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ = r.Readlink(filepath.Join(path, e.Name()))
		}
		out = append(out, fileInfo(e.Name(), fi, link))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return wire.Reply{Entries: out}, nil
}

func mkdir(req wire.Request) func(r *os.Root, path, _ string) (wire.Reply, error) {
	return func(r *os.Root, path, _ string) (wire.Reply, error) {
		mode := os.FileMode(req.Mode).Perm()
		if mode == 0 {
			mode = 0o755
		}
		if req.Recursive {
			return wire.Reply{}, r.MkdirAll(path, mode)
		}
		return wire.Reply{}, r.Mkdir(path, mode)
	}
}

func remove(req wire.Request) func(r *os.Root, path, _ string) (wire.Reply, error) {
	return func(r *os.Root, path, _ string) (wire.Reply, error) {
		if path == "." {
			return wire.Reply{}, fmt.Errorf("refusing to remove %s itself", r.Name())
		}
		if _, err := r.Lstat(path); err != nil {
			return wire.Reply{}, err
		}
		if req.Recursive {
			return wire.Reply{}, r.RemoveAll(path)
		}
		return wire.Reply{}, r.Remove(path)
	}
}

// rename refuses to replace an existing target unless req.Replace (the
// check and the rename are not one step: a file made in between is
// replaced, as with mv -n), and never replaces a directory.
func rename(req wire.Request) func(r *os.Root, path, to string) (wire.Reply, error) {
	return func(r *os.Root, path, to string) (wire.Reply, error) {
		if to == "" {
			return wire.Reply{}, errBadPath
		}
		if fi, err := r.Lstat(to); err == nil && (!req.Replace || fi.IsDir()) {
			return wire.Reply{}, &fs.PathError{Op: "rename", Path: req.To, Err: fs.ErrExist}
		}
		return wire.Reply{}, r.Rename(path, to)
	}
}

func chmod(req wire.Request) func(r *os.Root, path, _ string) (wire.Reply, error) {
	return func(r *os.Root, path, _ string) (wire.Reply, error) {
		return wire.Reply{}, r.Chmod(path, os.FileMode(req.Mode).Perm())
	}
}

func symlink(req wire.Request) func(r *os.Root, path, _ string) (wire.Reply, error) {
	return func(r *os.Root, path, _ string) (wire.Reply, error) {
		if req.Target == "" {
			return wire.Reply{}, errors.New("a symbolic link needs a target")
		}
		return wire.Reply{}, r.Symlink(req.Target, path)
	}
}

// readFile sends a regular file: a Reply with its information, its bytes
// as Data frames, then End (with an error's text, if reading failed
// midway).
func readFile(s *stream_, req wire.Request) {
	r, path, _, err := within(req)
	if err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	defer func() { _ = r.Close() }()
	f, err := r.Open(path)
	if err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.IsDir():
		err = &fs.PathError{Op: "read", Path: req.Path, Err: syscall.EISDIR}
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file (%s)", req.Path, fi.Mode().Type())
	case req.Limit > 0 && fi.Size() > req.Limit:
		err = fmt.Errorf("%s is %d bytes, more than the limit of %d: %w", req.Path, fi.Size(), req.Limit, syscall.EFBIG)
	}
	if err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	info := fileInfo(filepath.Base(path), fi, "")
	s.reply(wire.Reply{File: &info}, nil)
	var src io.Reader = f
	if req.Limit > 0 {
		// A file that grows while it is read stops at the limit + 1, which
		// the client refuses.
		src = io.LimitReader(f, req.Limit+1)
	}
	_, err = io.Copy(dataWriter(s, wire.FrameData), src)
	end := ""
	if err != nil {
		end = err.Error()
	}
	_ = s.frame(wire.FrameEnd, []byte(end))
}

var (
	errNoEnd   = errors.New("the client ended the stream before the end of the file")
	errBadPath = errors.New("the path is empty")
)

// writeFile replaces req.Path with the Data frames that follow, up to End,
// atomically: into a temporary file beside it, synced, then renamed over
// it, so a reader sees the old file or the new one, never half of it, and
// a write cut short leaves the old one. The Reply comes after End.
func writeFile(s *stream_, req wire.Request) {
	info, err := writeAtomically(s.Stream, req)
	if err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	s.reply(wire.Reply{File: info}, nil)
}

func writeAtomically(in io.Reader, req wire.Request) (*wire.FileInfo, error) {
	r, path, _, err := within(req)
	if err != nil {
		drain(in)
		return nil, err
	}
	defer func() { _ = r.Close() }()
	mode := os.FileMode(req.Mode).Perm()
	if mode == 0 {
		mode = 0o644
	}
	if fi, err := r.Lstat(path); err == nil && fi.IsDir() {
		drain(in)
		return nil, &fs.PathError{Op: "write", Path: req.Path, Err: syscall.EISDIR}
	}
	tmpName := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".agentsandbox-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	tmp, err := r.OpenFile(tmpName, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		drain(in)
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			_ = tmp.Close()
			_ = r.Remove(tmpName)
		}
	}()
	for {
		t, payload, err := wire.ReadFrame(in)
		if err != nil {
			return nil, errNoEnd
		}
		if t == wire.FrameEnd {
			break
		}
		if t != wire.FrameData {
			return nil, fmt.Errorf("%w: frame type %d while writing a file", wire.ErrMalformed, t)
		}
		if _, err := tmp.Write(payload); err != nil {
			drain(in)
			return nil, err
		}
	}
	if err := tmp.Chmod(mode); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := r.Rename(tmpName, path); err != nil {
		return nil, err
	}
	keep = true
	fi, err := r.Stat(path)
	if err != nil {
		return nil, err
	}
	info := fileInfo(filepath.Base(path), fi, "")
	return &info, nil
}

// drain reads a refused write's frames to its End, so the client, which
// sends before it reads, is not left blocked.
func drain(r io.Reader) {
	for {
		t, _, err := wire.ReadFrame(r)
		if err != nil || t == wire.FrameEnd {
			return
		}
	}
}

// watch sends an Event frame for each change under req.Path, in nested
// directories too (a directory made later is watched from when it
// appears), until the client closes the stream.
func watch(s *stream_, req wire.Request) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	defer func() { _ = w.Close() }()
	r, path, _, err := within(req)
	if err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	_ = r.Close()
	if err := addTree(w, filepath.Join(r.Name(), path)); err != nil {
		s.reply(wire.Reply{}, err)
		return
	}
	s.reply(wire.Reply{}, nil)
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, s.Stream)
		close(gone)
	}()
	for {
		select {
		case <-gone:
			return
		case err := <-w.Errors:
			_ = s.json(wire.FrameEvent, wire.Event{Op: "error", Path: err.Error()})
		case ev := <-w.Events:
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					_ = addTree(w, ev.Name)
				}
			}
			if err := s.json(wire.FrameEvent, wire.Event{Op: eventOp(ev.Op), Path: ev.Name}); err != nil {
				return
			}
		}
	}
}

func addTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil
		}
		if d.IsDir() {
			if err := w.Add(path); err != nil && path == root {
				return err
			}
		}
		return nil
	})
}

func eventOp(op fsnotify.Op) string {
	switch {
	case op.Has(fsnotify.Create):
		return "create"
	case op.Has(fsnotify.Remove):
		return "remove"
	case op.Has(fsnotify.Rename):
		return "rename"
	case op.Has(fsnotify.Write):
		return "write"
	default:
		return "chmod"
	}
}

// dial connects to a TCP port on the sandbox's loopback and, after the
// Reply, carries its bytes both ways: port-forwarding that works on every
// runtime, gVisor included. Only loopback: what the sandbox may reach
// beyond itself is its policy's business, not the agent's.
func dial(s *stream_, req wire.Request) {
	if req.Port <= 0 || req.Port > 65535 {
		s.reply(wire.Reply{}, fmt.Errorf("port %d is not a TCP port (1-65535)", req.Port))
		return
	}
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(req.Port)))
	if err != nil {
		conn, err = net.Dial("tcp", net.JoinHostPort("::1", strconv.Itoa(req.Port)))
	}
	if err != nil {
		s.reply(wire.Reply{}, fmt.Errorf("nothing listens on port %d in the sandbox: %w", req.Port, unwrapOp(err)))
		return
	}
	defer func() { _ = conn.Close() }()
	s.reply(wire.Reply{}, nil)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, s.Stream)
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(s.Stream, conn)
	_ = s.Close()
	<-done
}

func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
