package sandboxclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// Through the sandbox's agent a directory moves as file operations, a
// few files at a time over the one session, so it needs nothing in the
// image (no sh, no tar: a distroless image works) and keeps the promises
// of the tar way: a copy in appears whole or not at all, a copy out
// writes only through an os.Root and skips links out of it.

// parallelFiles is how many files move at once: enough to hide a round
// trip, few enough that one slow file holds back little.
const parallelFiles = 8

// copyDirFrom copies the workspace directory abs (shown as the caller
// wrote it) into root.
func (s *Session) copyDirFrom(ctx context.Context, shown, abs string, root *os.Root, limit int64) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelFiles)
	var skipped []string
	var total atomic.Int64
	var walk func(rel string) error
	walk = func(rel string) error {
		entries, err := s.ReadDir(gctx, path.Join(abs, rel))
		if err != nil {
			return fileError(path.Join(shown, rel), err)
		}
		for _, e := range entries {
			name := path.Join(rel, e.Name)
			mode := fs.FileMode(e.Mode)
			switch {
			case mode.IsDir():
				if err := root.MkdirAll(name, mode.Perm()|0o700); err != nil {
					return err
				}
				if err := walk(name); err != nil {
					return err
				}
			case mode.IsRegular():
				if total.Add(e.Size) > limit {
					return fmt.Errorf("%w: %s holds more than %d bytes", ErrTooLarge, shown, limit)
				}
				g.Go(func() error {
					return writeEntry(root, name, mode.Perm(), func(w io.Writer) error {
						_, n, err := s.ReadFile(gctx, path.Join(abs, name), w, limit)
						if err == nil && total.Add(n-e.Size) > limit {
							err = fmt.Errorf("%w: %s grew past %d bytes while copied", ErrTooLarge, shown, limit)
						}
						return fileError(path.Join(shown, name), err)
					})
				})
			case mode&fs.ModeSymlink != 0 && linksInside(name, e.Link):
				_ = root.Remove(name) // a link from an earlier copy
				if err := root.Symlink(e.Link, name); err != nil {
					return err
				}
			case mode&fs.ModeSymlink != 0:
				skipped = append(skipped, name+" -> "+e.Link)
			default:
				skipped = append(skipped, name)
			}
		}
		return nil
	}
	err := walk(".")
	if err != nil {
		cancel()
	}
	if err = firstCause(err, g.Wait()); err != nil {
		return skipped, fmt.Errorf("copying %s: %w", shown, err)
	}
	return skipped, nil
}

// firstCause is the error that stopped a copy: the walk's, unless the walk
// only stopped because a file's failure cancelled it.
func firstCause(walkErr, filesErr error) error {
	if walkErr == nil || errors.Is(walkErr, context.Canceled) && filesErr != nil {
		return filesErr
	}
	return walkErr
}

// linksInside tells whether the link name holding target stays inside the
// copied tree (relative, and never above its top).
func linksInside(name, target string) bool {
	resolved := path.Join(path.Dir(name), target)
	return !path.IsAbs(target) && resolved != ".." && !strings.HasPrefix(resolved, "../")
}

// copyDirTo copies the local directory src into a new directory beside
// the workspace path abs (shown as the caller wrote it) and renames it to
// abs once every file arrived; abs must not exist. Directories get their
// own modes last, deepest first, so none is read-only while it is filled.
func (s *Session) copyDirTo(ctx context.Context, src, shown, abs string, perm fs.FileMode) (err error) {
	switch _, err := s.Stat(ctx, abs); {
	case err == nil:
		return fmt.Errorf("%s already exists: %w", shown, fs.ErrExist)
	case !errors.Is(err, fs.ErrNotExist):
		return fileError(shown, err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	tmp := path.Join(path.Dir(abs), ".agentsandbox-upload."+hex.EncodeToString(suffix))
	if err := s.Mkdir(ctx, tmp, 0o700, false); err != nil {
		return fileError(shown, err)
	}
	defer func() {
		if err != nil {
			_ = s.Remove(context.WithoutCancel(ctx), tmp, true)
		}
	}()
	type dir struct {
		path string
		mode fs.FileMode
	}
	var dirs []dir
	filesCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(filesCtx)
	g.SetLimit(parallelFiles)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		remote := path.Join(tmp, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, dir{remote, info.Mode().Perm()})
			return s.Mkdir(gctx, remote, 0o700, false)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return s.Symlink(gctx, link, remote)
		case d.Type().IsRegular():
			g.Go(func() error {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer func() { _ = f.Close() }()
				_, err = s.WriteFile(gctx, remote, f, info.Mode().Perm())
				return err
			})
		}
		return nil // sockets, devices, pipes: nothing to copy
	})
	if err != nil {
		cancel()
	}
	err = firstCause(err, g.Wait())
	for i := len(dirs) - 1; i >= 0 && err == nil; i-- {
		err = s.Chmod(ctx, dirs[i].path, dirs[i].mode)
	}
	if err == nil {
		err = s.Chmod(ctx, tmp, perm)
	}
	if err == nil {
		err = s.Rename(ctx, tmp, abs, false)
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, fileError(shown, err))
	}
	return nil
}
