package sshproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"time"

	"github.com/pkg/sftp"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// serveSFTP serves the sftp subsystem on the session's channel, on top of
// the SDK's file operations: paths start in the workspace and cannot leave
// it, exactly as for `agentsandbox cp`, so scp (which speaks SFTP by
// default) and sftp work without an sftp-server in the image.
func (s *session) serveSFTP(ctx context.Context) int {
	if s.workspace == "" {
		s.fail(fmt.Errorf("sandbox %s has no workspace volume to transfer files to or from", s.server.Sandbox))
		return 1
	}
	fsys := &workspaceFS{ctx: ctx, client: s.server.Client, sandbox: s.server.Sandbox}
	server := sftp.NewRequestServer(keepOpen{s.ch}, sftp.Handlers{FileGet: fsys, FilePut: fsys, FileCmd: fsys, FileList: fsys},
		sftp.WithStartDirectory(s.workspace))
	if err := server.Serve(); err != nil && !errors.Is(err, io.EOF) {
		return 1
	}
	return 0
}

// keepOpen hides a channel's Close from the SFTP server, which closes its
// connection when done: the session still sends the exit status on it.
type keepOpen struct{ io.ReadWriter }

func (keepOpen) Close() error { return nil }

// workspaceFS is the sandbox's workspace as pkg/sftp's request handlers.
// Each file is moved whole: a read downloads it into an unnamed local
// temporary file that the client then reads at any offset, and a write is
// collected the same way and uploaded when the client closes it, so the
// sandbox never sees half a file (the SDK replaces a file only once every
// byte arrived) and a failed upload is reported on close, where scp and sftp
// check for it.
type workspaceFS struct {
	ctx     context.Context
	client  *sandboxclient.Client
	sandbox string

	// uploads are the files open for writing, by path: a client sets the
	// size and mode of a file it writes on its open handle (scp does), which
	// then applies to what is uploaded on close.
	mu      sync.Mutex
	uploads map[string]*upload
}

// Fileread downloads the file for the client to read.
func (w *workspaceFS) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	spool, err := spoolFile()
	if err != nil {
		return nil, err
	}
	if _, err := w.client.ReadFile(w.ctx, w.sandbox, r.Filepath, spool, sandboxclient.FileOptions{}); err != nil {
		_ = spool.Close()
		return nil, statusError(err)
	}
	return spool, nil
}

// Filewrite collects what the client writes and uploads it on Close. A
// file opened without truncation starts from its current content, so a
// write at an offset (a resumed upload) changes only those bytes.
func (w *workspaceFS) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	spool, err := spoolFile()
	if err != nil {
		return nil, err
	}
	flags := r.Pflags()
	if !flags.Trunc {
		_, err := w.client.ReadFile(w.ctx, w.sandbox, r.Filepath, spool, sandboxclient.FileOptions{})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			_ = spool.Close()
			return nil, statusError(err)
		}
		if err != nil && !flags.Creat {
			_ = spool.Close()
			return nil, statusError(err)
		}
	}
	u := &upload{File: spool, fs: w, path: r.Filepath}
	if r.AttrFlags().Permissions {
		u.mode = r.Attributes().FileMode().Perm()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.uploads == nil {
		w.uploads = map[string]*upload{}
	}
	w.uploads[r.Filepath] = u
	return u, nil
}

// upload is a file being written by the client, sent to the sandbox when
// the client closes it.
type upload struct {
	*os.File
	fs   *workspaceFS
	path string
	mode fs.FileMode
}

func (u *upload) Close() error {
	defer func() { _ = u.File.Close() }()
	u.fs.mu.Lock()
	if u.fs.uploads[u.path] == u {
		delete(u.fs.uploads, u.path)
	}
	mode := u.mode
	u.fs.mu.Unlock()
	size, err := u.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := u.Seek(0, io.SeekStart); err != nil {
		return err
	}
	opts := sandboxclient.FileOptions{Mode: mode}
	return statusError(u.fs.client.WriteFile(u.fs.ctx, u.fs.sandbox, u.path, u.File, size, opts))
}

// Filecmd changes the workspace: attributes, renames, removals and
// directories. Links are not made: a link the client planted could not be
// followed anyway, as the file operations refuse symbolic links.
func (w *workspaceFS) Filecmd(r *sftp.Request) error {
	var err error
	switch r.Method {
	case "Setstat":
		err = w.setstat(r)
	case "Rename":
		err = w.client.Rename(w.ctx, w.sandbox, r.Filepath, r.Target, false)
	case "PosixRename":
		err = w.client.Rename(w.ctx, w.sandbox, r.Filepath, r.Target, true)
	case "Rmdir", "Remove":
		err = w.client.Remove(w.ctx, w.sandbox, r.Filepath)
	case "Mkdir":
		var mode fs.FileMode
		if r.AttrFlags().Permissions {
			mode = r.Attributes().FileMode().Perm()
		}
		err = w.client.MakeDir(w.ctx, w.sandbox, r.Filepath, mode)
	default:
		return fmt.Errorf("%s is not supported in a sandbox's workspace: %w", r.Method, sftp.ErrSSHFxOpUnsupported)
	}
	return statusError(err)
}

// PosixRename is the posix-rename@openssh.com extension, which sftp's
// rename uses: it replaces an existing file.
func (w *workspaceFS) PosixRename(r *sftp.Request) error {
	return statusError(w.client.Rename(w.ctx, w.sandbox, r.Filepath, r.Target, true))
}

// setstat applies a size or mode change. On a file being uploaded both
// apply to the upload; on a file in the workspace a mode is changed there,
// and a size only if it is the file's size already (the file operations
// cannot truncate). Owners and times are left as they are: scp -p asks for
// them, the sandbox's user cannot change owners, and the file operations
// have no way to set times.
func (w *workspaceFS) setstat(r *sftp.Request) error {
	flags, attrs := r.AttrFlags(), r.Attributes()
	w.mu.Lock()
	open := w.uploads[r.Filepath]
	w.mu.Unlock()
	if open != nil {
		return open.setstat(flags, attrs)
	}
	if flags.Size {
		info, err := w.client.Stat(w.ctx, w.sandbox, r.Filepath)
		if err != nil {
			return err
		}
		if info.Size != int64(attrs.Size) {
			return fmt.Errorf("changing the size of a file not being written is not supported in a sandbox's workspace: %w", sftp.ErrSSHFxOpUnsupported)
		}
	}
	if flags.Permissions {
		return w.client.Chmod(w.ctx, w.sandbox, r.Filepath, attrs.FileMode().Perm())
	}
	return nil
}

func (u *upload) setstat(flags sftp.FileAttrFlags, attrs *sftp.FileStat) error {
	if flags.Size {
		if err := u.Truncate(int64(attrs.Size)); err != nil {
			return err
		}
	}
	if flags.Permissions {
		u.fs.mu.Lock()
		u.mode = attrs.FileMode().Perm()
		u.fs.mu.Unlock()
	}
	return nil
}

// Filelist lists a directory or describes one path.
func (w *workspaceFS) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	switch r.Method {
	case "List":
		entries, err := w.client.ListDir(w.ctx, w.sandbox, r.Filepath)
		if err != nil {
			return nil, statusError(err)
		}
		infos := make(listing, 0, len(entries))
		for _, e := range entries {
			infos = append(infos, entryInfo{sandboxclient.FileInfo{DirEntry: e, Mode: defaultMode(e.Type)}})
		}
		return infos, nil
	case "Stat":
		info, err := w.client.Stat(w.ctx, w.sandbox, r.Filepath)
		if err != nil {
			return nil, statusError(err)
		}
		return listing{entryInfo{*info}}, nil
	}
	return nil, fmt.Errorf("%s is not supported in a sandbox's workspace: %w", r.Method, sftp.ErrSSHFxOpUnsupported)
}

// defaultMode is the mode shown for a listed entry: the listing carries
// types and sizes only.
func defaultMode(kind string) fs.FileMode {
	switch kind {
	case "dir":
		return fs.ModeDir | 0o755
	case "symlink":
		return fs.ModeSymlink | 0o777
	}
	return 0o644
}

// statusError gives an SDK error the SFTP status code the client shows
// ("No such file", "Permission denied"), keeping its message.
func statusError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%v: %w", err, sftp.ErrSSHFxNoSuchFile)
	case errors.Is(err, sandboxclient.ErrPathEscape):
		return fmt.Errorf("%v: %w", err, sftp.ErrSSHFxPermissionDenied)
	}
	var forbidden *sandboxclient.ForbiddenError
	if errors.As(err, &forbidden) {
		return fmt.Errorf("%v: %w", err, sftp.ErrSSHFxPermissionDenied)
	}
	return err
}

// spoolFile is an unnamed temporary file: removed from the directory at
// once, it goes away with its last descriptor, whatever happens.
func spoolFile() (*os.File, error) {
	f, err := os.CreateTemp("", "agentsandbox-sftp-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	return f, nil
}

// listing is a ListerAt over a fixed list.
type listing []os.FileInfo

func (l listing) ListAt(dst []os.FileInfo, offset int64) (int, error) {
	if offset >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(dst, l[offset:])
	if n < len(dst) {
		return n, io.EOF
	}
	return n, nil
}

// entryInfo is an SDK file description as an os.FileInfo.
type entryInfo struct{ info sandboxclient.FileInfo }

func (e entryInfo) Name() string       { return path.Base(e.info.Name) }
func (e entryInfo) Size() int64        { return e.info.Size }
func (e entryInfo) Mode() fs.FileMode  { return e.info.Mode }
func (e entryInfo) ModTime() time.Time { return e.info.ModTime }
func (e entryInfo) IsDir() bool        { return e.info.Mode.IsDir() }
func (e entryInfo) Sys() any           { return nil }
