package sandboxclient

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Without the agent (dirs_agent.go), directories move as tar archives:
// `tar` in the sandbox, archive/tar here.
// Both directions guard against an archive that tries to leave its
// directory, and the local side writes only through an os.Root, which
// refuses to follow a link out of the destination.

// endMarker follows the archive the sandbox sends, so a cut stream (which
// client-go reports as success) is told from a whole one.
const endMarker = "agentsandbox-end\n"

// tarOutScript archives the directory $2 ("$abs/.") with tar.
const tarOutScript = scriptPrelude + `cd -P -- "$real" 2>/dev/null || die 3 "$2: no such directory"
tar -cf - . || die 7 "tar could not archive $2"
printf '%s' '` + endMarker + `'
`

// tarInScript unpacks the archive on stdin into a new directory beside $2
// and renames it to $2 once tar succeeded; $2 must not exist. The archive
// is padded to whole tar records, so tar ends without waiting for the end
// of stdin (which kwok never sends).
const tarInScript = scriptPrelude + `{ [ -e "$real" ] || [ -L "$real" ]; } && die 6 "$2 already exists"
tmp=$(mktemp -d "$dir/.agentsandbox-upload.XXXXXX") || die 7 "cannot create a directory beside $2"
trap 'rm -rf -- "$tmp"' EXIT
tar -xf - -C "$tmp" || die 7 "tar could not unpack into $2"
chmod "$3" "$tmp" && mv -- "$tmp" "$real" || die 7 "could not create $2"
trap - EXIT
echo written
`

// tarRecord is tar's default record size (20 blocks of 512 bytes).
const tarRecord = 10240

// CopyDirFrom copies the workspace directory dir, recursively, into the
// local directory dst (created when missing; files of the same name are
// replaced). Symbolic links that would point outside dst and special files
// are skipped and returned, as are hard links where the pod has no agent
// (through the agent a hard link arrives as a file of its own). opts.Limit
// caps the total size.
func (c *Client) CopyDirFrom(ctx context.Context, name, dir, dst string, opts FileOptions) (skipped []string, err error) {
	s, t, abs, err := c.fileOr(ctx, name, dir, "read files of")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	if s != nil {
		return s.copyDirFrom(ctx, dir, abs, root, opts.limit())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	type result struct {
		skipped []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		skipped, err := extract(pr, root, opts.limit())
		if err != nil {
			// Stop the stream: the sandbox's writes must not block.
			cancel()
			_ = pr.CloseWithError(err)
		}
		done <- result{skipped, err}
	}()
	runErr := c.runScript(ctx, t, tarOutScript, nil, pw, dir, abs+"/.")
	_ = pw.CloseWithError(runErr)
	res := <-done
	if res.err != nil {
		return res.skipped, fmt.Errorf("copying %s: %w", dir, res.err)
	}
	return res.skipped, runErr
}

// extract unpacks the archive into root and checks the end marker after it.
func extract(r io.Reader, root *os.Root, limit int64) ([]string, error) {
	var skipped []string
	var total int64
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return skipped, err
		}
		name := path.Clean(hdr.Name)
		if name == "." {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return skipped, fmt.Errorf("%w: archive entry %q", ErrPathEscape, hdr.Name)
		}
		mode := hdr.FileInfo().Mode().Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(name, mode|0o700)
		case tar.TypeReg:
			if total += hdr.Size; total > limit {
				return skipped, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
			}
			err = writeEntry(root, name, mode, func(w io.Writer) error {
				_, err := io.Copy(w, tr)
				return err
			})
		case tar.TypeSymlink:
			if !linksInside(name, hdr.Linkname) {
				skipped = append(skipped, name+" -> "+hdr.Linkname)
				continue
			}
			if err = root.MkdirAll(path.Dir(name), 0o755); err == nil {
				_ = root.Remove(name) // a link from an earlier copy
				err = root.Symlink(hdr.Linkname, name)
			}
		default:
			skipped = append(skipped, name)
		}
		if err != nil {
			return skipped, err
		}
	}
	// After the archive: tar's zero padding, then the marker.
	rest, err := io.ReadAll(r)
	if err != nil {
		return skipped, err
	}
	if string(bytes.TrimLeft(rest, "\x00")) != endMarker {
		return skipped, errors.New("the archive was cut short")
	}
	return skipped, nil
}

// writeEntry makes (or truncates) the file name under root, its
// directories too, and fills it.
func writeEntry(root *os.Root, name string, mode fs.FileMode, fill func(io.Writer) error) error {
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	err = fill(f)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}

// CopyDirTo copies the local directory src, recursively, to the workspace
// path dir, which must not exist yet: it appears only once every file
// arrived. Regular files, directories and symbolic links are copied;
// opts.Limit caps the total size.
func (c *Client) CopyDirTo(ctx context.Context, name, src, dir string, opts FileOptions) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a directory", src)
	}
	var total int64
	err = filepath.WalkDir(src, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		return err
	}
	if total > opts.limit() {
		return fmt.Errorf("%w: %s holds %d bytes, more than the limit of %d", ErrTooLarge, src, total, opts.limit())
	}
	s, t, abs, err := c.fileOr(ctx, name, dir, "write files to")
	if err != nil {
		return err
	}
	if s != nil {
		return s.copyDirTo(ctx, src, dir, abs, info.Mode().Perm())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	archiveErr := make(chan error, 1)
	go func() {
		err := archive(pw, src)
		if err != nil {
			cancel() // a cut archive must never be unpacked as whole
		}
		_ = pw.CloseWithError(err)
		archiveErr <- err
	}()
	var out bytes.Buffer
	runErr := c.runScript(ctx, t, tarInScript, pr, &out, dir, abs, strconv.FormatUint(uint64(info.Mode().Perm()), 8))
	_ = pr.Close()
	// The archive stops on a closed pipe when the sandbox refused the copy
	// before reading it all (the path exists, say): its refusal says why.
	if err := <-archiveErr; err != nil && (runErr == nil || !errors.Is(err, io.ErrClosedPipe)) {
		return fmt.Errorf("archiving %s: %w", src, err)
	}
	if runErr != nil {
		return runErr
	}
	if out.String() != "written\n" {
		return fmt.Errorf("copying %s: the sandbox did not confirm the copy", src)
	}
	return nil
}

// archive writes src as a tar archive padded to whole records.
func archive(w io.Writer, src string) error {
	counted := &countingWriter{w: w}
	tw := tar.NewWriter(counted)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if d.Type()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !d.IsDir() && !d.Type().IsRegular() {
			return nil // sockets, devices, pipes: nothing to copy
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = io.CopyN(tw, f, info.Size())
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err = w.Write(make([]byte, (tarRecord-counted.n%tarRecord)%tarRecord))
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
