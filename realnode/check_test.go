package realnode_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/isolationcheck"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
)

var (
	probeOnce sync.Once
	probeBin  []byte
	probeErr  error
)

// probeBinary builds cmd/sandbox-gate, the check's probe, once.
func probeBinary(t *testing.T) []byte {
	t.Helper()
	probeOnce.Do(func() {
		out := filepath.Join(t.TempDir(), "sandbox-gate")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "../cmd/sandbox-gate")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			probeErr = &buildError{out: string(b), err: err}
			return
		}
		probeBin, probeErr = os.ReadFile(out)
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	return probeBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string {
	return "go build ./cmd/sandbox-gate: " + e.err.Error() + ": " + e.out
}

// runCheck runs the isolation check on tpl, with the shared targets as
// more destinations it must not reach, and logs its table.
func (e env) runCheck(t *testing.T, opts isolationcheck.Options, to targets) (*isolationcheck.Report, error) {
	t.Helper()
	opts.Unreachable = []string{hostOf(to.server) + ":8080", to.nodePort, to.serviceRange}
	opts.Resolvers = []string{to.resolver.Addr()}
	opts.Probe = probeBinary(t)
	start := time.Now()
	opts.Progress = func(step string) { t.Logf("%s [%s]", step, time.Since(start).Round(100*time.Millisecond)) }
	report, err := isolationcheck.Run(context.Background(), e.sdk, e.c, opts)
	if report != nil {
		var table bytes.Buffer
		_ = report.Print(&table)
		t.Log("\n" + table.String())
	}
	return report, err
}

// checkIsolationCheck: on the node as hack/node.sh makes it, the check
// finds every probe held.
//
// Under gVisor it claims warm members of a pool, as agents get them; under
// runc it starts sandboxes from the template.
func (e env) checkIsolationCheck(t *testing.T, pool *v1.NodePool, to targets, handler string) {
	opts := isolationcheck.Options{Template: e.template(t, pool, nil).Name}
	if handler == realnode.GVisorHandler {
		opts = isolationcheck.Options{Pool: e.warmPool(t, opts.Template, 2).Name}
	}
	report, err := e.runCheck(t, opts, to)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"runs as a user other than root", "capabilities", "no new privileges", "service account token",
		"the node's processes", "root file system", "kernel", "the node's kubelet", "cloud metadata",
		"another sandbox over IPv4", "another sandbox over IPv6", "--unreachable", "the node's other ports",
		"the node's NodePort range", "ICMP echo", "DNS for a name no rule allows", "egress gate", "start-up window", "workspace size",
		"process limit", "the other sandbox, beside the fork bomb",
	}
	if handler == realnode.RuncHandler {
		want = append(want, "seccomp")
	}
	for _, probe := range want {
		// Under runc the kernel is the node's: a note, not a judgement.
		wantResult := isolationcheck.Held
		if probe == "kernel" && handler == realnode.RuncHandler {
			wantResult = isolationcheck.Note
		}
		row, ok := findRow(report, probe)
		switch {
		case !ok:
			t.Errorf("the report has no row %q", probe)
		case row.Result != wantResult:
			t.Errorf("%s: %s (observed %s), want %s", row.Probe, row.Result, row.Observed, wantResult)
		}
	}
	if n := report.Failed(); n > 0 {
		t.Errorf("%d probes escaped or did not run on the hardened node", n)
	}
}

// TestIsolationCheckFindsEscapes: with the node's NetworkPolicy enforcer
// stopped and its pods' IPv6 open, a template that lets the sandbox start
// without the gate (its egress names the kubelet's port) and workspaces on
// plain directories, the check reports each of those as an escape; with
// the gate, the sandboxes do not start at all, and the check says why.
func TestIsolationCheckFindsEscapes(t *testing.T) {
	e := requireNode(t)
	to := e.sharedTargets(t)
	pool := e.nodePool(t, realnode.RuncHandler)
	class := plainVolumes(t, e, 2)
	gated := e.template(t, pool, nil)
	holes := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		s.Network.Egress = []v1.EgressRule{tcp("203.0.113.0/24", 10250)}
		s.Workspace.StorageClassName = ptr.To(class)
		s.Workspace.Size = ptr.To(resource.MustParse(realnode.SmallVolume))
	})
	stopEnforcer(t)
	nodeToggle(t, "ipv6", "open", "closed")

	report, err := e.runCheck(t, isolationcheck.Options{Template: holes.Name, MaxProcesses: realnode.PodPidsLimit / 2}, to)
	if err != nil {
		t.Fatal(err)
	}
	for _, probe := range []string{
		"the node's kubelet", "another sandbox over IPv4", "another sandbox over IPv6", "--unreachable " + to.nodePort, "--unreachable " + to.serviceRange,
		"--unreachable " + hostOf(to.server), "the node's NodePort range", "egress gate", "start-up window",
		"workspace size", "process limit", "connections the other sandbox accepted",
	} {
		if row, ok := findRow(report, probe); !ok || row.Result != isolationcheck.Escaped {
			t.Errorf("%s: %+v, want ESCAPED", probe, row)
		}
	}
	if row, _ := findRow(report, "the node's NodePort range"); !strings.Contains(row.Observed, "30080") {
		t.Errorf("the NodePort range row does not name the open port 30080: %q", row.Observed)
	}
	// Under runc the sandbox opens no ICMP socket, enforcer or not.
	if row, ok := findRow(report, "ICMP echo"); !ok || row.Result != isolationcheck.Held || !strings.Contains(row.Observed, "ping_group_range") {
		t.Errorf("ICMP under runc with the enforcer stopped: %+v, want held for want of a socket", row)
	}
	// The node's resolver answered, so the name asked for left the sandbox.
	if row, ok := findRow(report, "DNS for a name no rule allows"); !ok || row.Result != isolationcheck.Escaped {
		t.Errorf("DNS to the node's resolver with the enforcer stopped: %+v, want ESCAPED", row)
	} else if name := row.Observed[strings.LastIndex(row.Observed, " ")+1:]; !to.resolver.Queried(name) {
		t.Errorf("the DNS row says %q, yet the node's resolver was never asked for %q", row.Observed, name)
	}

	_, err = e.runCheck(t, isolationcheck.Options{Template: gated.Name}, to)
	if err == nil || !strings.Contains(err.Error(), "PolicyNotEnforced") {
		t.Errorf("with the enforcer stopped, the check of a gated template returned %v; want its sandboxes refused with PolicyNotEnforced", err)
	}
}

func findRow(r *isolationcheck.Report, prefix string) (isolationcheck.Row, bool) {
	for _, row := range r.Rows {
		if strings.HasPrefix(row.Probe, prefix) {
			return row, true
		}
	}
	return isolationcheck.Row{}, false
}

// stopEnforcer stops the node's kube-router until the test ends. Its rules
// stay; pods started meanwhile are in none of them.
func stopEnforcer(t *testing.T) { nodeToggle(t, "enforcer", "stop", "start") }

// nodeToggle runs hack/node.sh what set now and hack/node.sh what reset
// when the test ends (ipv6 open: pods started meanwhile get link-local
// IPv6 addresses that nothing filters, as on the node before).
func nodeToggle(t *testing.T, what, set, reset string) {
	t.Helper()
	node := func(action string) {
		if out, err := exec.Command("../hack/node.sh", what, action).CombinedOutput(); err != nil {
			t.Fatalf("hack/node.sh %s %s: %v: %s", what, action, err, out)
		}
	}
	node(set)
	t.Cleanup(func() { node(reset) })
}

// plainVolumes makes n persistent volumes of SmallVolume that are plain
// directories of the node's disk (what the node's volumes were before
// hack/node.sh gave each a file system of its size) in a storage class of
// their own, and returns its name.
func plainVolumes(t *testing.T, e env, n int) string {
	t.Helper()
	class := testcluster.Name("plain")
	for i := range n {
		dir := filepath.Join(t.TempDir(), "volume")
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		// t.TempDir's parents are 0700: the sandbox's user must pass them.
		for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			_ = os.Chmod(d, 0o777)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: class + "-" + string(rune('a'+i))},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(realnode.SmallVolume)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName:              class,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
				},
			},
		}
		if err := e.c.Create(context.Background(), pv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.c.Delete(context.Background(), pv) })
	}
	return class
}
