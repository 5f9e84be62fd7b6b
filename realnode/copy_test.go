package realnode_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// checkCopyDir copies a tree into the sandbox and back through the agent:
// contents, modes (a read-only directory too) and links inside the tree
// kept, a link out of it skipped, a hard link made in the sandbox arriving
// as a file (the tar way would skip it), an existing target refused, and
// nothing of the copy's own left in the workspace.
func (e env) checkCopyDir(t *testing.T, sbx started) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := t.TempDir()
	blob := make([]byte, 1<<20)
	_, _ = rand.Read(blob)
	files := map[string][]byte{"a.txt": []byte("a\n"), "sub/blob.bin": blob, "sub/deeper/run.sh": []byte("#!/bin/sh\n"), "empty": nil, "ro/kept.txt": []byte("kept\n")}
	for name, data := range files {
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.Symlink("sub/blob.bin", filepath.Join(src, "link-in")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(src, "link-out")))
	must(t, os.Chmod(filepath.Join(src, "ro"), 0o555))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(src, "ro"), 0o755) })

	if err := e.sdk.CopyDirTo(ctx, sbx.Name, src, "tree", sandboxclient.FileOptions{}); err != nil {
		t.Fatalf("copy in: %v", err)
	}
	if err := e.sdk.CopyDirTo(ctx, sbx.Name, src, "tree", sandboxclient.FileOptions{}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second copy onto the same path: %v, want fs.ErrExist", err)
	}
	if out, code, stderr := e.exec(t, sbx.Name, "ln", "tree/a.txt", "tree/hard"); code != 0 {
		t.Fatalf("ln: %d %s %s", code, out, stderr)
	}
	entries, err := e.sdk.ListDir(ctx, sbx.Name, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		if strings.HasPrefix(entry.Name, ".agentsandbox-upload") {
			t.Errorf("the copy left %s in the workspace", entry.Name)
		}
	}

	back := filepath.Join(t.TempDir(), "back")
	skipped, err := e.sdk.CopyDirFrom(ctx, sbx.Name, "tree", back, sandboxclient.FileOptions{})
	if err != nil {
		t.Fatalf("copy out: %v", err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(back, "ro"), 0o755) })
	if len(skipped) != 1 || skipped[0] != "link-out -> /etc/passwd" {
		t.Errorf("skipped %q, want only the link out of the tree", skipped)
	}
	files["hard"] = files["a.txt"]
	for name, data := range files {
		got, err := os.ReadFile(filepath.Join(back, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s came back as %d bytes, %v; want %d", name, len(got), err, len(data))
		}
	}
	for name, want := range map[string]fs.FileMode{"sub/deeper/run.sh": 0o755, "a.txt": 0o644} {
		if info, err := os.Lstat(filepath.Join(back, name)); err != nil || info.Mode() != want {
			t.Errorf("%s: %v, %v; want mode %v", name, info.Mode(), err, want)
		}
	}
	if info, err := e.sdk.Stat(ctx, sbx.Name, "tree/ro"); err != nil || info.Mode != 0o555|fs.ModeDir {
		t.Errorf("tree/ro in the sandbox: %+v, %v; want a directory of mode 0555", info, err)
	}
	if link, err := os.Readlink(filepath.Join(back, "link-in")); err != nil || link != "sub/blob.bin" {
		t.Errorf("link-in: %q, %v", link, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
