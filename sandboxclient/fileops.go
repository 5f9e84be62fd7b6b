package sandboxclient

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// FileInfo describes one workspace path, as Stat reports it.
type FileInfo struct {
	DirEntry
	// Mode holds the type bits (fs.ModeDir, fs.ModeSymlink) and the
	// permissions.
	Mode    fs.FileMode
	ModTime time.Time
}

// The scripts below share the prelude of the file scripts in files.go and
// its exit codes; they are what an SFTP server needs beyond reading, writing
// and listing (scp and sftp stat their targets, make directories, rename
// and remove). Stat needs stat(1) with -c, as GNU coreutils and BusyBox
// have it.
const (
	statScript = scriptPrelude + `[ -e "$real" ] || [ -L "$real" ] || die 3 "$2: no such file or directory"
exec stat -c '%f %s %Y' -- "$real"
`
	mkdirScript = scriptPrelude + `[ -e "$real" ] || [ -L "$real" ] && die 8 "$2 already exists"
mkdir -m "$3" -- "$real" || die 7 "could not make $2"
echo done
`
	removeScript = scriptPrelude + `[ -e "$real" ] || [ -L "$real" ] || die 3 "$2: no such file or directory"
if [ -d "$real" ] && [ ! -L "$real" ]; then rmdir -- "$real" || die 7 "could not remove $2 (not empty?)"
else rm -f -- "$real" || die 7 "could not remove $2"; fi
echo done
`
	// renameScript checks the destination's directory as the prelude
	// checks the source's; $4 is "replace" when an existing file may be
	// replaced (POSIX rename), anything else refuses an existing target.
	renameScript = scriptPrelude + `[ -e "$real" ] || [ -L "$real" ] || die 3 "$2: no such file or directory"
to=$(cd -P -- "$(dirname -- "$3")" 2>/dev/null && pwd -P) || die 3 "$3: no such directory"
case "$to/" in "$ws"/*) ;; *) die 4 "$3 leaves the workspace through a symbolic link" ;; esac
to="$to/$(basename -- "$3")"
[ -d "$to" ] && die 6 "$3 is a directory"
if [ "$4" != replace ] && { [ -e "$to" ] || [ -L "$to" ]; }; then die 8 "$3 already exists"; fi
mv -f -- "$real" "$to" || die 7 "could not rename $2 to $3"
echo done
`
	chmodScript = scriptPrelude + `[ -L "$real" ] && die 4 "$2 is a symbolic link"
[ -e "$real" ] || die 3 "$2: no such file or directory"
chmod "$3" -- "$real" || die 7 "could not change the mode of $2"
echo done
`
)

// Stat describes a workspace path without following a symbolic link at its
// end.
func (c *Client) Stat(ctx context.Context, name, file string) (*FileInfo, error) {
	s, t, abs, err := c.fileOr(ctx, name, file, "read files of")
	if err != nil {
		return nil, err
	}
	if s != nil {
		f, err := s.Stat(ctx, abs)
		if err != nil {
			return nil, fileError(file, err)
		}
		info := entryOf(f)
		info.Name = path.Base(abs)
		return &info, nil
	}
	var out bytes.Buffer
	if err := c.runScript(ctx, t, statScript, nil, &out, file, itself(t, abs)); err != nil {
		return nil, err
	}
	fields := strings.Fields(out.String())
	if len(fields) != 3 {
		return nil, fmt.Errorf("stat %s: unexpected output %q", file, out.String())
	}
	raw, errMode := strconv.ParseUint(fields[0], 16, 32)
	size, errSize := strconv.ParseInt(fields[1], 10, 64)
	mtime, errTime := strconv.ParseInt(fields[2], 10, 64)
	if errMode != nil || errSize != nil || errTime != nil {
		return nil, fmt.Errorf("stat %s: unexpected output %q", file, out.String())
	}
	info := &FileInfo{Mode: unixMode(uint32(raw)), ModTime: time.Unix(mtime, 0)}
	info.Name, info.Size = path.Base(abs), size
	switch {
	case info.Mode.IsDir():
		info.Type, info.Size = "dir", 0
	case info.Mode&fs.ModeSymlink != 0:
		info.Type, info.Size = "symlink", 0
	case info.Mode.IsRegular():
		info.Type = "file"
	default:
		info.Type = "other"
	}
	return info, nil
}

// MakeDir makes one directory (its parent must exist) with the mode's
// permissions (0755 when zero).
func (c *Client) MakeDir(ctx context.Context, name, dir string, mode fs.FileMode) error {
	if mode.Perm() == 0 {
		mode = 0o755
	}
	return c.runOp(ctx, name, dir, "write files to", func(s *Session, abs string) error {
		return s.Mkdir(ctx, abs, mode, false)
	}, mkdirScript, octal(mode))
}

// Remove removes a file, a symbolic link or an empty directory.
func (c *Client) Remove(ctx context.Context, name, file string) error {
	return c.runOp(ctx, name, file, "write files to", func(s *Session, abs string) error {
		return s.Remove(ctx, abs, false)
	}, removeScript)
}

// Rename moves a file or directory within the workspace. With replace an
// existing file at the destination is replaced (an existing directory
// never is); without, an existing destination is an error wrapping
// fs.ErrExist.
func (c *Client) Rename(ctx context.Context, name, from, to string, replace bool) error {
	s, t, absFrom, err := c.fileOr(ctx, name, from, "write files to")
	if err != nil {
		return err
	}
	absTo, err := workspacePath(s.workspaceOr(t), to)
	if err != nil {
		return err
	}
	if s != nil {
		return fileError(from, s.Rename(ctx, absFrom, absTo, replace))
	}
	mode := "refuse"
	if replace {
		mode = "replace"
	}
	return c.confirm(ctx, t, renameScript, from, absFrom, absTo, mode)
}

// Chmod sets the permissions of a file or directory.
func (c *Client) Chmod(ctx context.Context, name, file string, mode fs.FileMode) error {
	return c.runOp(ctx, name, file, "write files to", func(s *Session, abs string) error {
		return s.Chmod(ctx, abs, mode)
	}, chmodScript, octal(mode))
}

// runOp resolves file and runs the operation through the sandbox's
// session, or where it has no agent a script that confirms with "done".
func (c *Client) runOp(ctx context.Context, name, file, action string, viaAgent func(*Session, string) error, script string, args ...string) error {
	s, t, abs, err := c.fileOr(ctx, name, file, action)
	if err != nil {
		return err
	}
	if s != nil {
		return fileError(file, viaAgent(s, abs))
	}
	return c.confirm(ctx, t, script, file, append([]string{itself(t, abs)}, args...)...)
}

// confirm runs script and checks that it reported "done": a stream cut
// before the script's end must not read as success.
func (c *Client) confirm(ctx context.Context, t *target, script, shown string, args ...string) error {
	var out bytes.Buffer
	if err := c.runScript(ctx, t, script, nil, &out, shown, args...); err != nil {
		return err
	}
	if out.String() != "done\n" {
		return fmt.Errorf("%s in sandbox %s: the sandbox did not confirm the change", shown, t.sandbox.Name)
	}
	return nil
}

// itself is abs as the scripts' prelude takes it: the workspace's own path
// gets "/." so that the prelude checks the workspace itself rather than its
// parent.
func itself(t *target, abs string) string {
	if strings.TrimSuffix(abs, "/") == strings.TrimSuffix(t.workspace, "/") {
		return abs + "/."
	}
	return abs
}

// unixMode converts a stat(2) st_mode to an fs.FileMode.
func unixMode(raw uint32) fs.FileMode {
	mode := fs.FileMode(raw & 0o777)
	switch raw & 0o170000 {
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	}
	return mode
}

func octal(mode fs.FileMode) string { return strconv.FormatUint(uint64(mode.Perm()), 8) }
