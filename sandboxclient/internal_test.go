package sandboxclient

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/client-go/util/exec"

	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/sandbox"
)

func TestWorkspaceVolumeIsTheReconcilers(t *testing.T) {
	if workspaceVolume != sandbox.WorkspaceName {
		t.Errorf("workspaceVolume %q, the reconciler names it %q", workspaceVolume, sandbox.WorkspaceName)
	}
}

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
