package sandboxclient_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestFilesRoundTrip writes 50 MiB of random bytes into a sandbox and reads
// them back byte-identical, lists the directory, and checks the size limits.
func TestFilesRoundTrip(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, workspace := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx := context.Background()
	if err := os.Mkdir(filepath.Join(workspace, "data"), 0o755); err != nil {
		t.Fatal(err)
	}

	const size = 50 << 20
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := alice.client.WriteFile(ctx, sbx.Name, "data/blob.bin", bytes.NewReader(data), size, sandboxclient.FileOptions{Mode: 0o600}); err != nil {
		t.Fatalf("write: %v", err)
	}
	hash := sha256.New()
	n, err := alice.client.ReadFile(ctx, sbx.Name, "data/blob.bin", hash, sandboxclient.FileOptions{})
	if err != nil || n != size {
		t.Fatalf("read: %d bytes, %v", n, err)
	}
	if want := sha256.Sum256(data); !bytes.Equal(hash.Sum(nil), want[:]) {
		t.Fatal("the file read back differs from the one written")
	}
	// An absolute path inside the workspace names the same file.
	if n, err := alice.client.ReadFile(ctx, sbx.Name, filepath.Join(workspace, "data/blob.bin"), io.Discard, sandboxclient.FileOptions{}); err != nil || n != size {
		t.Errorf("read by absolute path: %d bytes, %v", n, err)
	}

	entries, err := alice.client.ListDir(ctx, sbx.Name, "data")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(entries) != 1 || entries[0] != (sandboxclient.DirEntry{Name: "blob.bin", Type: "file", Size: size}) {
		t.Errorf("list: %+v", entries)
	}
	if entries, err := alice.client.ListDir(ctx, sbx.Name, ""); err != nil || len(entries) != 1 || entries[0].Name != "data" || entries[0].Type != "dir" {
		t.Errorf("list of the workspace: %+v, %v", entries, err)
	}

	_, err = alice.client.ReadFile(ctx, sbx.Name, "data/blob.bin", io.Discard, sandboxclient.FileOptions{Limit: 1 << 20})
	if !errors.Is(err, sandboxclient.ErrTooLarge) {
		t.Errorf("read over the limit: %v", err)
	}
	err = alice.client.WriteFile(ctx, sbx.Name, "data/big", bytes.NewReader(data), size, sandboxclient.FileOptions{Limit: 1 << 20})
	if !errors.Is(err, sandboxclient.ErrTooLarge) {
		t.Errorf("write over the limit: %v", err)
	}
	// A source shorter than announced never replaces the file.
	err = alice.client.WriteFile(ctx, sbx.Name, "data/short", strings.NewReader("abc"), 10, sandboxclient.FileOptions{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short source: %v", err)
	}
	if _, err := os.Stat(filepath.Join(workspace, "data", "short")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a short upload left data/short: %v", err)
	}
	if _, err := alice.client.ReadFile(ctx, sbx.Name, "missing", io.Discard, sandboxclient.FileOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// The short upload's process in the sandbox may still be starting: the
	// workspace is removed when the test ends, and must not change under
	// that removal. (On kwok, whose exec never delivers the end of stdin,
	// that process then waits for the rest for good.)
	waitUnchanging(t, filepath.Join(workspace, "data"))
}

// waitUnchanging waits until two listings of dir 500 ms apart are the same.
func waitUnchanging(t *testing.T, dir string) {
	t.Helper()
	list := func() string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err.Error()
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return fmt.Sprint(names)
	}
	last := list()
	testcluster.Eventually(t, dir+" to stop changing", func() (bool, string) {
		time.Sleep(500 * time.Millisecond)
		now := list()
		same := now == last
		last = now
		return same, now
	})
}

// TestFilesStayInTheWorkspace tries to leave the workspace by "..", by an
// absolute path and through symbolic links the sandbox could plant.
func TestFilesStayInTheWorkspace(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, workspace := newTemplate(t)
	sbx := claim(t, alice, sandboxclient.ClaimOptions{Template: tpl.Name})
	ctx := context.Background()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What code in the sandbox could do: links to a directory and a file
	// outside the workspace.
	if code, err := alice.client.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{
		"sh", "-c", `ln -s "$1" "$2/dirlink" && ln -s "$1/secret" "$2/filelink"`, "sh", outside, workspace,
	}}); err != nil || code != 0 {
		t.Fatalf("planting links: %d %v", code, err)
	}

	for _, p := range []string{"../secret", "data/../../secret", filepath.Join(outside, "secret"), "/etc/passwd", "dirlink/secret", "filelink"} {
		var out bytes.Buffer
		if _, err := alice.client.ReadFile(ctx, sbx.Name, p, &out, sandboxclient.FileOptions{}); !errors.Is(err, sandboxclient.ErrPathEscape) || out.Len() != 0 {
			t.Errorf("read %s: %v (%d bytes)", p, err, out.Len())
		}
		if err := alice.client.WriteFile(ctx, sbx.Name, p, strings.NewReader("x"), 1, sandboxclient.FileOptions{}); !errors.Is(err, sandboxclient.ErrPathEscape) {
			t.Errorf("write %s: %v", p, err)
		}
	}
	if _, err := alice.client.ListDir(ctx, sbx.Name, "dirlink"); !errors.Is(err, sandboxclient.ErrPathEscape) {
		t.Errorf("list dirlink: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(outside, "secret"))
	if err != nil || string(got) != "secret" {
		t.Errorf("the file outside changed: %q %v", got, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files appeared outside the workspace: %v", entries)
	}
}
