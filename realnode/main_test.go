package realnode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

func TestMain(m *testing.M) {
	// The real node joins one local cluster; make test offers this package
	// that one only.
	testcluster.Only(testcluster.NodeCluster)
	code := reconciletest.Run(m, func(mgr ctrl.Manager) error {
		return reconcile.SetupControllers(mgr, reconcile.Options{
			EgressGateImage: realnode.GateImage,
			EgressGateway:   types.NamespacedName{Namespace: v1.SystemNamespace, Name: v1.EgressGatewayName},
		})
	})
	for i := len(teardown) - 1; i >= 0; i-- {
		teardown[i]()
	}
	os.Exit(code)
}

// teardown undoes the package's shared fixtures after every test ran.
var teardown []func()

// waitReady is how long a sandbox on the real node may take to be Ready:
// a cold gVisor start on two busy cores takes seconds, not minutes.
const waitReady = 3 * time.Minute

// env is what every test on the real node uses.
type env struct {
	cluster *testcluster.Cluster
	c       client.Client
	sdk     *sandboxclient.Client
}

// requireNode returns the test environment, or skips the test, saying why,
// when the real node is not up: make test starts it where the machine
// allows (hack/node.sh check) and then sets AGENTSANDBOX_REAL_NODE, which
// makes its absence a failure instead.
func requireNode(t testing.TB) env {
	t.Helper()
	cluster := testcluster.Get(t)
	node := &corev1.Node{}
	err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: realnode.NodeName}, node)
	problem := ""
	switch {
	case apierrors.IsNotFound(err):
		problem = "node " + realnode.NodeName + " does not exist"
	case err != nil:
		problem = err.Error()
	case node.Labels[realnode.GroupLabel] != realnode.Group:
		problem = fmt.Sprintf("node %s is in group %q, not %q (hack/node.sh up --demo?)", realnode.NodeName, node.Labels[realnode.GroupLabel], realnode.Group)
	case !nodeReady(node):
		problem = "node " + realnode.NodeName + " is not Ready"
	}
	if problem != "" {
		msg := "no real node: " + problem + "; start one with hack/node.sh up (hack/node.sh check says what this machine lacks)"
		if os.Getenv(realnode.RequiredEnv) == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sdk, err := sandboxclient.New(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return env{cluster: cluster, c: cluster.Client, sdk: sdk}
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodePool makes the pool whose runtime handler the test's sandboxes run
// under. A node belongs to one pool at a time, so tests of different
// runtimes take turns; the cleanup waits until the node has left the pool.
func (e env) nodePool(t testing.TB, handler string) *v1.NodePool {
	t.Helper()
	pool := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("real-" + handler)},
		Spec: v1.NodePoolSpec{
			RuntimeHandler: handler,
			NodeSelector:   map[string]string{realnode.GroupLabel: realnode.Group},
			Taints:         []v1.NodePoolTaint{{Key: realnode.TaintKey, Value: "true", Effect: v1.TaintEffect(corev1.TaintEffectNoSchedule)}},
		},
	}
	if err := e.c.Create(context.Background(), pool); err != nil {
		t.Fatalf("create node pool: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = e.c.Delete(ctx, pool)
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			node := &corev1.Node{}
			if err := e.c.Get(ctx, client.ObjectKey{Name: realnode.NodeName}, node); err != nil {
				return false, err
			}
			return node.Labels[v1.LabelNodePool] != pool.Name, nil
		})
		if err != nil {
			t.Errorf("node %s did not leave node pool %s: %v", realnode.NodeName, pool.Name, err)
		}
	})
	return pool
}

// template is a Python sandbox on pool that serves its workspace on port
// 8080 (so other pods have something to reach), with a read-only root and
// a persistent workspace on the node's local volumes.
func (e env) template(t testing.TB, pool *v1.NodePool, mutate func(*v1.SandboxTemplateSpec)) *v1.SandboxTemplate {
	t.Helper()
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("real")},
		Spec: v1.SandboxTemplateSpec{
			Image:   realnode.PythonImage,
			Command: []string{"python3", "-m", "http.server", "8080", "--bind", "0.0.0.0"},
			Resources: v1.Resources{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			SecurityContext: v1.SecurityContext{
				RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
				ReadOnlyRootFilesystem: true,
			},
			Workspace:   v1.Workspace{Persistent: true, StorageClassName: ptr.To(realnode.StorageClass), Size: ptr.To(resource.MustParse("1Gi"))},
			NodePoolRef: &v1.LocalObjectReference{Name: pool.Name},
			Network:     v1.Network{ClusterDNS: ptr.To(false)},
		},
	}
	if mutate != nil {
		mutate(&tpl.Spec)
	}
	if err := e.c.Create(context.Background(), tpl); err != nil {
		t.Fatalf("create template: %v", err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), tpl) })
	return tpl
}

// warmPool makes a warm pool of replicas members of template and waits
// until they are Ready; the cleanup deletes it.
func (e env) warmPool(t testing.TB, template string, replicas int32) *v1.WarmPool {
	t.Helper()
	ctx := context.Background()
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("real-warm")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: template}, Replicas: ptr.To(replicas)},
	}
	if err := e.c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), pool) })
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitReady, true, func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(pool), pool)
		return err == nil && pool.Status.ReadyReplicas >= replicas, err
	})
	if err != nil {
		t.Fatalf("warm pool %s never had %d Ready members: %v", pool.Name, replicas, err)
	}
	return pool
}

// started is a sandbox Ready on the real node, with its pod as it runs.
type started struct {
	*v1.Sandbox
	pod *corev1.Pod
}

// sandboxes creates one sandbox from each template at once and waits for
// all of them to be Ready; the cleanup deletes them and waits until they
// are gone.
func (e env) sandboxes(t testing.TB, templates ...*v1.SandboxTemplate) []started {
	t.Helper()
	ctx := context.Background()
	out := make([]started, len(templates))
	for i, tpl := range templates {
		sbx := &v1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("real")},
			Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}, Owner: "alice@example.com"},
		}
		if err := e.c.Create(ctx, sbx); err != nil {
			t.Fatalf("create sandbox: %v", err)
		}
		t.Cleanup(func() { e.deleteAndWait(t, sbx.Name) })
		out[i].Sandbox = sbx
	}
	for i := range out {
		out[i] = e.waitReady(t, out[i].Name)
	}
	return out
}

func (e env) waitReady(t testing.TB, name string) started {
	t.Helper()
	sbx, err := e.sdk.WaitReady(context.Background(), name, waitReady, nil)
	if err != nil {
		t.Fatalf("sandbox %s: %v", name, err)
	}
	pod := &corev1.Pod{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: sbx.Status.Namespace, Name: environment.PodName}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != realnode.NodeName {
		t.Fatalf("sandbox %s runs on node %q, not the real node", name, pod.Spec.NodeName)
	}
	return started{Sandbox: sbx, pod: pod}
}

func (e env) deleteAndWait(t testing.TB, name string) {
	ctx := context.Background()
	sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.c.Delete(ctx, sbx); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete sandbox %s: %v", name, err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(sbx), sbx)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("sandbox %s not gone: %v", name, err)
	}
}

// python runs a Python program in the sandbox and returns its standard
// output, failing the test on a non-zero exit.
func (e env) python(t testing.TB, name, program string, args ...string) string {
	t.Helper()
	out, code, stderr := e.exec(t, name, append([]string{"python3", "-c", program}, args...)...)
	if code != 0 {
		t.Fatalf("python in sandbox %s exited %d: %s", name, code, stderr)
	}
	return out
}

func (e env) exec(t testing.TB, name string, command ...string) (stdout string, code int, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code, err := e.sdk.Exec(context.Background(), name, sandboxclient.ExecOptions{
		Command: command, Stdout: &out, Stderr: &errOut, Timeout: 2 * time.Minute,
	})
	// A command killed by a signal (the OOM killer's, say) has its 128+N.
	if _, killed := errors.AsType[*sandboxclient.KilledError](err); err != nil && !killed {
		t.Fatalf("exec %q in sandbox %s: %v (stderr %s)", strings.Join(command, " "), name, err, errOut.String())
	}
	return out.String(), code, errOut.String()
}

// pythonJSON runs a program that prints one JSON value and decodes it.
func (e env) pythonJSON(t testing.TB, name, program string, into any, args ...string) {
	t.Helper()
	out := e.python(t, name, program, args...)
	if err := json.Unmarshal([]byte(out), into); err != nil {
		t.Fatalf("sandbox %s printed %q: %v", name, out, err)
	}
}
