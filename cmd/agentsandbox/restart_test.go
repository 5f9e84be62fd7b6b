package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// reconciler is the real agentsandbox binary running `reconcile` against the
// test cluster, which a test can SIGKILL and restart.
type reconciler struct {
	t    *testing.T
	bin  string
	conf string
	// args are flags of the run beyond the kubeconfig (by default:
	// no leader election, no metrics or health endpoints).
	args []string
	proc *exec.Cmd
	// log collects the output of every run, shown when the test fails.
	log *os.File
}

// binDir holds the binary the restart tests build once; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "agentsandbox-bin")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "agentsandbox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
})

func startReconciler(t *testing.T, cluster *testcluster.Cluster) *reconciler {
	t.Helper()
	return startReconcilerWith(t, cluster, "--leader-elect=false", "--metrics-addr=0", "--health-addr=0")
}

// startReconcilerWith starts the reconciler on cluster with the given flags.
func startReconcilerWith(t *testing.T, cluster *testcluster.Cluster, args ...string) *reconciler {
	t.Helper()
	return startReconcilerOn(t, cluster.Kubeconfig, args...)
}

// startReconcilerOn starts the reconciler with the kubeconfig at conf and
// the given flags.
func startReconcilerOn(t *testing.T, conf string, args ...string) *reconciler {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	log, err := os.Create(filepath.Join(t.TempDir(), "reconciler.log"))
	if err != nil {
		t.Fatal(err)
	}
	r := &reconciler{t: t, bin: bin, conf: conf, args: args, log: log}
	r.start()
	t.Cleanup(func() {
		_ = r.proc.Process.Signal(os.Interrupt)
		_ = r.proc.Wait()
		if t.Failed() {
			if out, err := os.ReadFile(log.Name()); err == nil {
				t.Logf("reconciler output (last 8 KiB):\n%s", out[max(0, len(out)-8192):])
			}
		}
		_ = log.Close()
	})
	return r
}

// deleteWhileReconciled deletes obj when the test ends and waits until it
// is gone, while the reconcilers started before this call still run (a
// cleanup registered after theirs runs before them): a warm pool's
// finalizer, which deletes its members, needs a reconciler.
func deleteWhileReconciled(t *testing.T, c client.Client, obj client.Object) {
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %s: %v", obj.GetName(), err)
			return
		}
		live := obj.DeepCopyObject().(client.Object)
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), live)), nil
		})
		if err != nil {
			t.Errorf("%s still there 2 minutes after its delete (finalizers %v)", obj.GetName(), live.GetFinalizers())
		}
	})
}

func (r *reconciler) start() {
	r.proc = exec.Command(r.bin, append([]string{"reconcile", "--kubeconfig", r.conf}, r.args...)...)
	r.proc.Stdout, r.proc.Stderr = r.log, r.log
	// A test binary that dies (a panic, the -timeout) must not leave a
	// reconciler acting on the cluster the next run uses.
	r.proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.proc.Start(); err != nil {
		r.t.Fatal(err)
	}
}

// notJSON are the lines of the reconciler's output so far that are not
// a JSON object: with --zap-encoder=json (as config/manager runs it) a log
// pipeline must be able to parse every line, client-go's included.
func (r *reconciler) notJSON() []string {
	out, err := os.ReadFile(r.log.Name())
	if err != nil {
		r.t.Fatal(err)
	}
	var lines []string
	for line := range strings.Lines(string(out)) {
		var obj map[string]any
		if strings.TrimSpace(line) != "" && json.Unmarshal([]byte(line), &obj) != nil {
			lines = append(lines, line)
		}
	}
	return lines
}

// killAndRestart SIGKILLs the reconciler times, each at a random moment
// up to within after the previous start, and starts it again each time.
func (r *reconciler) killAndRestart(times int, within time.Duration) {
	for i := 0; i < times; i++ {
		time.Sleep(time.Duration(rand.Int64N(int64(within))))
		if err := r.proc.Process.Signal(syscall.SIGKILL); err != nil {
			r.t.Fatal(err)
		}
		_ = r.proc.Wait()
		r.start()
	}
}

func waitReady(t *testing.T, c client.Client, s *v1.Sandbox) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			return false, err
		}
		return conditions.IsTrue(s, v1.ReadyCondition) && s.Status.Namespace != "", nil
	})
	if err != nil {
		t.Fatalf("sandbox %s not Ready after the restarts: %s", s.Name, conditions.GetMessage(s, v1.ReadyCondition))
	}
}

func createSandboxes(t *testing.T, c client.Client, n int, spec v1.SandboxSpec) []*v1.Sandbox {
	t.Helper()
	var out []*v1.Sandbox
	for i := 0; i < n; i++ {
		s := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("restart")}, Spec: spec}
		if err := c.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), s) })
		out = append(out, s)
	}
	return out
}

// deleteAndWaitGone deletes the sandboxes and waits for every namespace they
// held to be gone.
func deleteAndWaitGone(t *testing.T, c client.Client, sandboxes []*v1.Sandbox) {
	t.Helper()
	ctx := context.Background()
	for _, s := range sandboxes {
		if err := c.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, s := range sandboxes {
			list := &corev1.NamespaceList{}
			if err := c.List(ctx, list, client.MatchingLabels{v1.LabelSandbox: s.Name}); err != nil || len(list.Items) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("namespaces left behind after deleting the sandboxes: %v", err)
	}
}

// TestReconcilerSurvivesSIGKILL runs the real binary, kills it with SIGKILL
// at random moments while it builds a batch of sandboxes, restarts it, and
// checks that every sandbox converges with exactly one of each object and
// nothing is left after deletion.
func TestReconcilerSurvivesSIGKILL(t *testing.T) {
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("restart")},
		Spec:       v1.SandboxTemplateSpec{Image: "python:3.12", Workspace: v1.Workspace{Persistent: true}},
	}
	if err := c.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, tpl) })

	proc := startReconciler(t, cluster)
	sandboxes := createSandboxes(t, c, 8, v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}, Owner: "alice@example.com"})
	proc.killAndRestart(3, 450*time.Millisecond)

	for _, s := range sandboxes {
		waitReady(t, c, s)
		ns := client.InNamespace(s.Status.Namespace)
		for _, list := range []client.ObjectList{&corev1.PodList{}, &networkingv1.NetworkPolicyList{}, &corev1.PersistentVolumeClaimList{}, &corev1.ResourceQuotaList{}} {
			if err := c.List(ctx, list, ns); err != nil {
				t.Fatal(err)
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(items); n != 1 {
				t.Errorf("sandbox %s: %d objects in %T, want exactly 1", s.Name, n, list)
			}
		}
	}
	deleteAndWaitGone(t, c, sandboxes)
}
