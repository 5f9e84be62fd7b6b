package sandboxclient_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestFileOperations: Stat, MakeDir, Chmod, Rename and Remove do in the
// workspace what their names say, and refuse what leaves it.
func TestFileOperations(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, workspace := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx := context.Background()
	c := alice.client
	if err := os.WriteFile(filepath.Join(workspace, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}

	info, err := c.Stat(ctx, sbx.Name, "a.txt")
	if err != nil || info.Type != "file" || info.Size != 5 || info.Mode != 0o644 || time.Since(info.ModTime) > time.Hour {
		t.Errorf("stat a.txt: %+v %v", info, err)
	}
	if info, err := c.Stat(ctx, sbx.Name, "."); err != nil || info.Type != "dir" || !info.Mode.IsDir() {
		t.Errorf("stat of the workspace: %+v %v", info, err)
	}
	if _, err := c.Stat(ctx, sbx.Name, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of a missing file: %v", err)
	}

	if err := c.MakeDir(ctx, sbx.Name, "dir", 0o700); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	if st, err := os.Stat(filepath.Join(workspace, "dir")); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("dir after mkdir: %v %v", st, err)
	}
	if err := c.MakeDir(ctx, sbx.Name, "dir", 0); !errors.Is(err, fs.ErrExist) {
		t.Errorf("mkdir of an existing directory: %v", err)
	}
	if err := c.Chmod(ctx, sbx.Name, "a.txt", 0o600); err != nil {
		t.Errorf("chmod: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(workspace, "a.txt")); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode after chmod: %v", st)
	}

	if err := os.WriteFile(filepath.Join(workspace, "b.txt"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, sbx.Name, "a.txt", "b.txt", false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("rename over an existing file without replace: %v", err)
	}
	if err := c.Rename(ctx, sbx.Name, "a.txt", "b.txt", true); err != nil {
		t.Errorf("rename with replace: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(workspace, "b.txt")); string(got) != "hello" {
		t.Errorf("b.txt after rename: %q", got)
	}
	if err := c.Rename(ctx, sbx.Name, "b.txt", "dir", true); err == nil {
		t.Error("rename over a directory succeeded")
	}
	if err := c.Rename(ctx, sbx.Name, "b.txt", "dir/c.txt", false); err != nil {
		t.Errorf("rename into a directory: %v", err)
	}
	if err := c.Remove(ctx, sbx.Name, "dir"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("remove of a directory that is not empty: %v", err)
	}
	if err := c.Remove(ctx, sbx.Name, "dir/c.txt"); err != nil {
		t.Errorf("remove of a file: %v", err)
	}
	if err := c.Remove(ctx, sbx.Name, "dir"); err != nil {
		t.Errorf("remove of an empty directory: %v", err)
	}
	if entries, err := os.ReadDir(workspace); err != nil || len(entries) != 0 {
		t.Errorf("workspace after the removals: %v %v", entries, err)
	}

	// Out of the workspace: by path, and through a link the sandbox's code
	// planted (kwok runs the commands on this host: the target is the
	// test's own directory).
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(workspace, "escape")); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"stat ../":              statErr(c.Stat(ctx, sbx.Name, "../x")),
		"mkdir through a link":  c.MakeDir(ctx, sbx.Name, "escape/d", 0),
		"rename out by a link":  c.Rename(ctx, sbx.Name, "escape", "escape/moved", false),
		"rename to an absolute": c.Rename(ctx, sbx.Name, "escape", filepath.Join(outside, "x"), false),
		"chmod of the link":     c.Chmod(ctx, sbx.Name, "escape", 0o777),
	} {
		if !errors.Is(err, sandboxclient.ErrPathEscape) {
			t.Errorf("%s: %v; want ErrPathEscape", name, err)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the directory outside the workspace now has %d entries", len(entries))
	}
	if err := c.Remove(ctx, sbx.Name, "escape"); err != nil {
		t.Errorf("removing the link itself: %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("removing the link removed its target: %v", err)
	}
}

func statErr(_ *sandboxclient.FileInfo, err error) error { return err }

// TestDialPortCarriesTraffic opens one connection to the sandbox's echo
// port without a local listener, and a refused port reports why.
func TestDialPortCarriesTraffic(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, _ := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx := context.Background()
	conn, err := alice.client.DialPort(ctx, sbx.Name, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "ping\n" {
		t.Errorf("echo: %q %v", got, err)
	}
	closed, err := alice.client.DialPort(ctx, sbx.Name, 9)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closed.Close() }()
	_, _ = io.WriteString(closed, "x")
	if _, err := io.ReadAll(closed); err == nil || !strings.Contains(err.Error(), "port 9") {
		t.Errorf("a port nothing forwards: %v; want the node's reason", err)
	}
}
