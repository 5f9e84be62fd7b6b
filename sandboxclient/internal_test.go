package sandboxclient

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/util/exec"

	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

func TestWorkspacePath(t *testing.T) {
	for _, tc := range []struct {
		ws, in, want string
		escape       bool
	}{
		{"/workspace", "a/b.txt", "/workspace/a/b.txt", false},
		{"/workspace", "./a/../b", "/workspace/b", false},
		{"/workspace", ".", "/workspace", false},
		{"/workspace/", "/workspace/x", "/workspace/x", false},
		{"/workspace", "/workspace", "/workspace", false},
		{"/workspace", "../etc/passwd", "", true},
		{"/workspace", "a/../../x", "", true},
		{"/workspace", "/etc/passwd", "", true},
		{"/workspace", "/workspace-other/x", "", true},
		{"/workspace", "/workspace/../x", "", true},
	} {
		got, err := workspacePath(tc.ws, tc.in)
		if tc.escape != errors.Is(err, ErrPathEscape) || got != tc.want {
			t.Errorf("workspacePath(%q, %q) = %q, %v", tc.ws, tc.in, got, err)
		}
	}
	for _, bad := range []string{"", "a\x00b"} {
		if _, err := workspacePath("/workspace", bad); err == nil {
			t.Errorf("workspacePath accepted %q", bad)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		ok   bool
	}{
		{exec.CodeExitError{Err: errors.New("command terminated with exit code 7"), Code: 7}, 7, true},
		{fmt.Errorf("stream: %w", exec.CodeExitError{Code: 2}), 2, true},
		{errors.New("Internal error occurred: error executing command in container: cmd wait: sh -c exit 3: exit status 3"), 3, true},
		{errors.New("Internal error occurred: error executing command in container: cmd start: nope: exec: not found"), 0, false},
		{errors.New("exit status 4"), 0, false},
	} {
		if code, ok := exitCode(tc.err); code != tc.code || ok != tc.ok {
			t.Errorf("exitCode(%v) = %d, %v; want %d, %v", tc.err, code, ok, tc.code, tc.ok)
		}
	}
}

func TestKilledBy(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *KilledError
	}{
		{errors.New("Internal error occurred: error executing command in container: cmd wait: sh -c kill -9 $$: signal: killed"), &KilledError{"KILL", 9}},
		{errors.New("Internal error occurred: error executing command in container: cmd wait: sleep 9: signal: terminated"), &KilledError{"TERM", 15}},
		{errors.New("Internal error occurred: error executing command in container: cmd wait: x: signal: CPU time limit exceeded"), &KilledError{"XCPU", 24}},
		{errors.New("Internal error occurred: error executing command in container: cmd wait: x: signal: signal 40"), nil},
		{errors.New("Internal error occurred: error executing command in container: cmd wait: x: exit status 1"), nil},
		{errors.New("signal: killed"), nil},
	} {
		got, ok := killedBy(tc.err)
		if ok != (tc.want != nil) || (ok && *got != *tc.want) {
			t.Errorf("killedBy(%v) = %v, %v; want %v", tc.err, got, ok, tc.want)
		}
	}
}

// TestExtractStaysInside feeds extract archives a hostile sandbox could
// send: entries that climb out, links out followed by files through them,
// and a file through a link already in the destination.
func TestExtractStaysInside(t *testing.T) {
	outside := t.TempDir()
	for _, tc := range []struct {
		name    string
		entries []tar.Header
		escape  bool
	}{
		{"dot-dot", []tar.Header{{Name: "../evil", Typeflag: tar.TypeReg, Size: 1}}, true},
		{"absolute", []tar.Header{{Name: "/" + outside + "/evil", Typeflag: tar.TypeReg, Size: 1}}, false},
		{"link out, then through it", []tar.Header{
			{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "l/evil", Typeflag: tar.TypeReg, Size: 1},
		}, false},
		{"relative link out", []tar.Header{
			{Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "../../" + filepath.Base(outside)},
		}, false},
		{"through a link already there", []tar.Header{{Name: "pre/evil", Typeflag: tar.TypeReg, Size: 1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := t.TempDir()
			if err := os.Symlink(outside, filepath.Join(dst, "pre")); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range tc.entries {
				h.Mode = 0o644
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
				if h.Size > 0 {
					_, _ = tw.Write([]byte("x"))
				}
			}
			_ = tw.Close()
			buf.WriteString(endMarker)
			root, err := os.OpenRoot(dst)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = root.Close() }()
			_, err = extract(&buf, root, 1<<20)
			if tc.escape && !errors.Is(err, ErrPathEscape) {
				t.Errorf("err %v, want ErrPathEscape", err)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Fatalf("the archive wrote outside the destination: %v (err %v)", entries, err)
			}
		})
	}
}

// TestSizesKeepsTheLatest: sizes pushed while nobody reads replace one
// another instead of holding up the queue's reader, and the channel closes
// with the queue.
func TestSizesKeepsTheLatest(t *testing.T) {
	q := NewTerminalSizes()
	sizes := Sizes(q)
	for cols := uint32(80); cols <= 83; cols++ {
		q.Push(cols, 24)
		time.Sleep(10 * time.Millisecond) // the goroutine takes each from the queue
	}
	q.Close()
	var got []wire.Size
	for size := range sizes {
		got = append(got, size)
	}
	if len(got) != 1 || got[0] != (wire.Size{Cols: 83, Rows: 24}) {
		t.Errorf("sizes read after four pushes: %+v, want only the last, 83x24", got)
	}
}

// TestFirstCause: a copy reports the failure that stopped it, not the
// cancellation that failure caused in the walk.
func TestFirstCause(t *testing.T) {
	walk, file := errors.New("walk failed"), errors.New("file failed")
	cancelled := fmt.Errorf("mkdir: %w", context.Canceled)
	for _, tc := range []struct{ walk, files, want error }{
		{nil, nil, nil},
		{walk, nil, walk},
		{nil, file, file},
		{walk, context.Canceled, walk},
		{cancelled, file, file},
		{cancelled, nil, cancelled},
	} {
		if got := firstCause(tc.walk, tc.files); !errors.Is(got, tc.want) {
			t.Errorf("firstCause(%v, %v) = %v, want %v", tc.walk, tc.files, got, tc.want)
		}
	}
}
