package sandboxclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// DefaultFileLimit caps a ReadFile or WriteFile whose options set no limit.
const DefaultFileLimit int64 = 1 << 30

var (
	// ErrPathEscape is returned for a path outside the sandbox's workspace,
	// whether by "..", by an absolute path or through a symbolic link.
	ErrPathEscape = errors.New("path leaves the workspace")
	// ErrTooLarge is returned when a file is bigger than the limit.
	ErrTooLarge = errors.New("file larger than the limit")
)

// FileOptions tune ReadFile and WriteFile.
type FileOptions struct {
	// Limit is the largest file moved, in bytes; 0 means DefaultFileLimit.
	Limit int64
	// Mode of a written file (default 0644).
	Mode fs.FileMode
}

func (o FileOptions) limit() int64 {
	if o.Limit > 0 {
		return o.Limit
	}
	return DefaultFileLimit
}

// DirEntry is one entry of a workspace directory.
type DirEntry struct {
	Name string `json:"name"`
	// Type is file, dir, symlink or other.
	Type string `json:"type"`
	// Size in bytes, for files.
	Size int64 `json:"size"`
}

// The file operations run sh scripts in the sandbox with the paths as
// arguments, never spliced into the script. They need sh, cat, head -c, wc,
// mktemp, mv, chmod, dirname and basename in the image (GNU coreutils,
// BusyBox and BSD all have them), as kubectl cp needs tar. Each script first checks,
// after resolving symbolic links, that the directory it works in lies inside
// the workspace, and refuses a symbolic link as the file itself: a link the
// sandbox's code planted cannot turn a read or a write into one elsewhere.
// Exit codes tell the client which error to report. Each script also ends
// its output in a way the client checks (a size header, "written", an end
// record): a stream cut without an exit status looks like success to
// client-go, and a cut transfer must not.
const (
	codeNotFound   = 3
	codeEscape     = 4
	codeTooLarge   = 5
	codeWrongType  = 6
	codeIncomplete = 7
	codeExists     = 8
)

// scriptPrelude defines die and sets $real to the physical path of $2 when
// $2's directory lies physically inside the workspace $1.
const scriptPrelude = `set -u
die() { code=$1; shift; printf '%s\n' "$*" >&2; exit "$code"; }
ws=$(cd -P -- "$1" 2>/dev/null && pwd -P) || die 3 "no workspace at $1"
dir=$(cd -P -- "$(dirname -- "$2")" 2>/dev/null && pwd -P) || die 3 "$2: no such directory"
case "$dir/" in "$ws"/*) ;; *) die 4 "$2 leaves the workspace through a symbolic link" ;; esac
real="$dir/$(basename -- "$2")"
`

const readScript = scriptPrelude + `[ -L "$real" ] && die 4 "$2 is a symbolic link"
[ -e "$real" ] || die 3 "$2: no such file"
[ -f "$real" ] || die 6 "$2 is not a regular file"
size=$(($(wc -c <"$real")))
[ "$size" -le "$3" ] || die 5 "$2 is $size bytes, more than the limit of $3"
printf '%s\n' "$size"
exec cat -- "$real"
`

// writeScript reads exactly $3 bytes into a temporary file beside the target
// and renames it over the target only when all of them arrived, so a broken
// upload never leaves a half-written file. It does not wait for the end of
// stdin: some node servers (kwok's) never deliver it.
const writeScript = scriptPrelude + `[ -L "$real" ] && die 4 "$2 is a symbolic link"
[ -d "$real" ] && die 6 "$2 is a directory"
tmp=$(mktemp "$dir/.agentsandbox-upload.XXXXXX") || die 7 "cannot create a file beside $2"
trap 'rm -f -- "$tmp"' EXIT
head -c "$3" >"$tmp" || die 7 "writing $2 failed"
got=$(($(wc -c <"$tmp")))
[ "$got" -eq "$3" ] || die 7 "upload of $2 ended after $got of $3 bytes"
chmod "$4" "$tmp" && mv -f -- "$tmp" "$real" || die 7 "could not replace $2"
trap - EXIT
echo written
`

// listScript prints type, size and name of every entry, NUL-terminated so
// any file name survives.
const listScript = scriptPrelude + `cd -P -- "$real" 2>/dev/null || die 3 "$2: no such directory"
for f in * .[!.]* ..?*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  if [ -L "$f" ]; then t=symlink s=0
  elif [ -d "$f" ]; then t=dir s=0
  elif [ -f "$f" ]; then t=file s=$(($(wc -c <"$f")))
  else t=other s=0
  fi
  printf '%s %s %s\0' "$t" "$s" "$f"
done
printf 'end\0'
`

// workspacePath resolves p, relative to the workspace or absolute inside
// it, to a clean absolute path, refusing any that leaves the workspace.
func workspacePath(workspace, p string) (string, error) {
	if workspace == "" {
		return "", errors.New("the sandbox has no workspace volume")
	}
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("invalid path %q", p)
	}
	ws := path.Clean(workspace)
	abs := path.Clean(p)
	if !path.IsAbs(p) {
		abs = path.Join(ws, p)
	}
	if abs != ws && !strings.HasPrefix(abs, strings.TrimSuffix(ws, "/")+"/") {
		return "", fmt.Errorf("%w: %q is %s, outside the workspace %s", ErrPathEscape, p, abs, ws)
	}
	return abs, nil
}

// ReadFile streams a workspace file to w and returns its size. path is
// relative to the workspace (or absolute inside it).
func (c *Client) ReadFile(ctx context.Context, name, file string, w io.Writer, opts FileOptions) (int64, error) {
	s, t, abs, err := c.fileOr(ctx, name, file, "read files of")
	if err != nil {
		return 0, err
	}
	if s != nil {
		_, n, err := s.ReadFile(ctx, abs, w, opts.limit())
		return n, fileError(file, err)
	}
	// The script refuses a file over the limit before sending it; the
	// writer also stops one that grows past it while it is read.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &sizedWriter{w: w, limit: opts.limit(), abort: cancel, size: -1}
	err = c.runScript(ctx, t, readScript, nil, out, file, abs, strconv.FormatInt(opts.limit(), 10))
	switch {
	case out.err != nil:
		return out.n, fmt.Errorf("reading %s: %w", file, out.err)
	case err != nil:
		return out.n, err
	case out.size < 0 || out.n != out.size:
		return out.n, fmt.Errorf("reading %s: the transfer ended after %d of %d bytes", file, out.n, out.size)
	}
	return out.n, nil
}

// WriteFile streams exactly size bytes from r into a workspace file,
// replacing it only once every byte arrived. The file's directory must
// exist.
func (c *Client) WriteFile(ctx context.Context, name, file string, r io.Reader, size int64, opts FileOptions) error {
	if size > opts.limit() {
		return fmt.Errorf("%w: %s would be %d bytes, more than the limit of %d", ErrTooLarge, file, size, opts.limit())
	}
	if size < 0 {
		return fmt.Errorf("invalid size %d", size)
	}
	s, t, abs, err := c.fileOr(ctx, name, file, "write files to")
	if err != nil {
		return err
	}
	mode := opts.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	// A source that ends early must not leave the write waiting for bytes
	// that never come: cancelling ends the streams.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := &exactReader{r: r, remaining: size, short: cancel}
	if s != nil {
		_, err := s.WriteFile(ctx, abs, in, mode)
		if in.remaining > 0 && in.err != nil {
			return fmt.Errorf("reading the source of %s after %d of %d bytes: %w", file, size-in.remaining, size, in.err)
		}
		return fileError(file, err)
	}
	var out bytes.Buffer
	err = c.runScript(ctx, t, writeScript, in, &out, file, abs, strconv.FormatInt(size, 10), octal(mode))
	switch {
	case in.remaining > 0 && in.err != nil:
		return fmt.Errorf("reading the source of %s after %d of %d bytes: %w", file, size-in.remaining, size, in.err)
	case err != nil:
		return err
	case out.String() != "written\n":
		return fmt.Errorf("writing %s: the sandbox did not confirm the write", file)
	}
	return nil
}

// ListDir lists a workspace directory ("" or "." is the workspace itself).
func (c *Client) ListDir(ctx context.Context, name, dir string) ([]DirEntry, error) {
	if dir == "" {
		dir = "."
	}
	s, t, abs, err := c.fileOr(ctx, name, dir, "list files of")
	if err != nil {
		return nil, err
	}
	if s != nil {
		infos, err := s.ReadDir(ctx, abs)
		if err != nil {
			return nil, fileError(dir, err)
		}
		entries := make([]DirEntry, 0, len(infos))
		for _, f := range infos {
			entries = append(entries, entryOf(f).DirEntry)
		}
		return entries, nil
	}
	var out bytes.Buffer
	// "$abs/." makes the prelude check the directory itself, not its parent.
	if err := c.runScript(ctx, t, listScript, nil, &out, dir, abs+"/."); err != nil {
		return nil, err
	}
	records := strings.Split(out.String(), "\x00")
	if len(records) < 2 || records[len(records)-2] != "end" {
		return nil, fmt.Errorf("listing %s: the listing was cut short", dir)
	}
	var entries []DirEntry
	for _, rec := range records[:len(records)-2] {
		parts := strings.SplitN(rec, " ", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("unexpected listing entry %q", rec)
		}
		size, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("unexpected listing entry %q", rec)
		}
		entries = append(entries, DirEntry{Type: parts[0], Size: size, Name: parts[2]})
	}
	return entries, nil
}

// runScript runs one of the file scripts with the workspace and args as
// its positional parameters and turns its exit code into an error; shown is
// the path as the caller wrote it.
func (c *Client) runScript(ctx context.Context, t *target, script string, stdin io.Reader, stdout io.Writer, shown string, args ...string) error {
	var stderr bytes.Buffer
	cmd := append([]string{"sh", "-c", script, "agentsandbox", t.workspace}, args...)
	code, err := c.exec(ctx, t, ExecOptions{Command: cmd, Stdin: stdin, Stdout: stdout, Stderr: &stderr})
	if err != nil {
		return err
	}
	msg := strings.TrimSpace(stderr.String())
	switch code {
	case 0:
		return nil
	case codeNotFound:
		return fmt.Errorf("%s: %w", msg, fs.ErrNotExist)
	case codeEscape:
		return fmt.Errorf("%w: %s", ErrPathEscape, msg)
	case codeTooLarge:
		return fmt.Errorf("%w: %s", ErrTooLarge, msg)
	case codeExists:
		return fmt.Errorf("%s: %w", msg, fs.ErrExist)
	}
	if msg == "" {
		msg = fmt.Sprintf("exit code %d", code)
	}
	return fmt.Errorf("%s in sandbox %s failed: %s", shown, t.sandbox.Name, msg)
}

// sizedWriter takes the file's size from the first line of the read
// script's output and passes at most that many bytes, and never more than
// limit, on to w; it calls abort when the stream goes wrong.
type sizedWriter struct {
	w           io.Writer
	limit, size int64
	n           int64
	header      []byte
	err         error
	abort       func()
}

func (s *sizedWriter) Write(p []byte) (int, error) {
	written := len(p)
	if s.size < 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.header = append(s.header, p...)
			return written, nil
		}
		s.header = append(s.header, p[:i]...)
		size, err := strconv.ParseInt(string(s.header), 10, 64)
		if err != nil || size < 0 {
			return 0, s.fail(fmt.Errorf("unexpected size header %q", s.header))
		}
		s.size, p = size, p[i+1:]
	}
	switch total := s.n + int64(len(p)); {
	case total > s.limit:
		return 0, s.fail(fmt.Errorf("%w: more than %d bytes arrived", ErrTooLarge, s.limit))
	case total > s.size:
		return 0, s.fail(fmt.Errorf("the file grew past %d bytes while being read", s.size))
	}
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err != nil {
		return 0, s.fail(err)
	}
	return written, nil
}

func (s *sizedWriter) fail(err error) error {
	s.err = err
	s.abort()
	return err
}

// exactReader reads remaining bytes of r and then reports EOF; when r ends
// (or fails) first it records why and calls short.
type exactReader struct {
	r         io.Reader
	remaining int64
	err       error
	short     func()
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.remaining <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.remaining {
		p = p[:e.remaining]
	}
	n, err := e.r.Read(p)
	e.remaining -= int64(n)
	if err != nil && e.remaining > 0 {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		e.err = err
		e.short()
	}
	return n, err
}
