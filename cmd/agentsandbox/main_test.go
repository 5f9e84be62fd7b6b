package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionPrintsAPIVersion(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "agentsandbox dev") || !strings.Contains(out.String(), "API agentsandbox.dev/v1alpha1") {
		t.Errorf("version output %q", out.String())
	}
}

func TestReconcileRefusesArguments(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetArgs([]string{"reconcile", "extra"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "unknown command") && !strings.Contains(err.Error(), "accepts 0 arg") {
		t.Fatalf("reconcile with an argument: %v", err)
	}
}

// TestReconcileRefusesLeaseTimingsThatCannotWork: client-go's leader
// election needs retry < renew deadline < lease duration; the reconciler
// says so before it connects to anything.
func TestReconcileRefusesLeaseTimingsThatCannotWork(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetArgs([]string{"reconcile", "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--leader-elect-renew-deadline (10s) < --leader-elect-lease-duration (5s) must hold") {
		t.Fatalf("reconcile with a renew deadline beyond the lease: %v", err)
	}
}
