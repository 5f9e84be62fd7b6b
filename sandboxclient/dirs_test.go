package sandboxclient_test

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

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestCopyDirRoundTrip copies a directory tree into a sandbox and back:
// files byte-identical, modes and links inside the tree kept, a link out of
// it skipped on the way back.
func TestCopyDirRoundTrip(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, workspace := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx := context.Background()

	src := t.TempDir()
	blob := make([]byte, 3<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"a.txt": []byte("a\n"), "sub/blob.bin": blob, "sub/deeper/run.sh": []byte("#!/bin/sh\n"), "empty": nil}
	for name, data := range files {
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), data, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/blob.bin", filepath.Join(src, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(src, "outside")); err != nil {
		t.Fatal(err)
	}

	if err := alice.client.CopyDirTo(ctx, sbx.Name, src, "tree", sandboxclient.FileOptions{}); err != nil {
		t.Fatalf("copy in: %v", err)
	}
	if err := alice.client.CopyDirTo(ctx, sbx.Name, src, "tree", sandboxclient.FileOptions{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("copy onto an existing path: %v", err)
	}
	if err := alice.client.CopyDirTo(ctx, sbx.Name, src, "big", sandboxclient.FileOptions{Limit: 1 << 20}); !errors.Is(err, sandboxclient.ErrTooLarge) {
		t.Errorf("copy in over the limit: %v", err)
	}
	if err := alice.client.CopyDirTo(ctx, sbx.Name, src, "../tree", sandboxclient.FileOptions{}); !errors.Is(err, sandboxclient.ErrPathEscape) {
		t.Errorf("copy in out of the workspace: %v", err)
	}
	checkTree(t, filepath.Join(workspace, "tree"), files)

	dst := filepath.Join(t.TempDir(), "back")
	skipped, err := alice.client.CopyDirFrom(ctx, sbx.Name, "tree", dst, sandboxclient.FileOptions{})
	if err != nil {
		t.Fatalf("copy out: %v", err)
	}
	if len(skipped) != 1 || skipped[0] != "outside -> /etc/hostname" {
		t.Errorf("skipped %v, want the link out of the tree", skipped)
	}
	checkTree(t, dst, files)
	if _, err := alice.client.CopyDirFrom(ctx, sbx.Name, "tree", t.TempDir(), sandboxclient.FileOptions{Limit: 1 << 20}); !errors.Is(err, sandboxclient.ErrTooLarge) {
		t.Errorf("copy out over the limit: %v", err)
	}
}

// checkTree compares a copied tree with the files it came from.
func checkTree(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in %s: %d bytes, %v", name, dir, len(got), err)
		}
	}
	if info, err := os.Stat(filepath.Join(dir, "sub/deeper/run.sh")); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode: %v %v", info, err)
	}
	if info, err := os.Stat(filepath.Join(dir, "emptydir")); err != nil || !info.IsDir() {
		t.Errorf("emptydir: %v", err)
	}
	if link, err := os.Readlink(filepath.Join(dir, "inside")); err != nil || link != "sub/blob.bin" {
		t.Errorf("link inside the tree: %q %v", link, err)
	}
}
