package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestCheckIsolationSaysWhyItCannotRun: without a probe, with a probe that
// is not an executable, or for a template that does not exist, the check
// exits 2 saying which. (It runs against the real node in realnode/.)
func TestCheckIsolationSaysWhyItCannotRun(t *testing.T) {
	admin := testcluster.Developer{Name: "admin", Kubeconfig: testcluster.Get(t).Kubeconfig}
	notELF := filepath.Join(t.TempDir(), "sandbox-gate")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"check", "isolation", "--template", "python"}, "no sandbox-gate binary beside this one or on PATH"},
		{[]string{"check", "isolation", "--template", "python", "--probe", notELF}, "not a Linux executable"},
		{[]string{"check", "isolation", "--template", "no-such-template", "--probe", self}, `reading template no-such-template: sandboxtemplates.agentsandbox.dev "no-such-template" not found`},
		{[]string{"check", "isolation", "--probe", self}, `at least one of the flags in the group [template pool] is required`},
		{[]string{"check", "isolation", "--template", "a", "--pool", "b", "--probe", self}, `if any flags in the group [template pool] are set none of the others can be`},
		{[]string{"check", "isolation", "--pool", "no-such-pool", "--probe", self}, `reading warm pool no-such-pool: warmpools.agentsandbox.dev "no-such-pool" not found`},
		{[]string{"check", "isolation", "--template", "python", "--probe", self, "-o", "yaml"}, `-o "yaml": want table or json`},
	}
	for _, tc := range cases {
		got := cli(t, admin, "", tc.args...)
		if got.code == 0 || !strings.Contains(got.stderr, tc.want) {
			t.Errorf("agentsandbox %s: exit %d, stderr %q; want an error saying %q", strings.Join(tc.args, " "), got.code, got.stderr, tc.want)
		}
	}
	if got := cli(t, admin, "", "check", "isolation", "--template", "no-such-template", "--probe", self); got.code != 2 {
		t.Errorf("a check that cannot run exited %d, want 2", got.code)
	}
}
