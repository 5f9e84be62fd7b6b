// Package testcluster gives tests a real Kubernetes API server with the
// agentsandbox.dev CRDs installed.
//
// With KUBECONFIG set, tests use that cluster (a kind cluster, say) unchanged.
// Without it they start, or reuse, the local kwok cluster of hack/cluster.sh.
// `make test` instead brings up several local clusters and names them in
// AGENTSANDBOX_TEST_CLUSTERS, so that go test runs packages side by side.
//
// A test package holds its cluster alone while it runs: each package runs
// the reconciler in-process, and two reconcilers acting on the same objects
// is not how it runs in a cluster. Connect takes a free cluster of those
// offered (an exclusive lock per kubeconfig, released when the test binary
// exits) and waits while none is free, so `go test ./...` is safe whatever
// its -p. Parallel tests of one package share its cluster, taking unique
// names from Name.
package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// FieldManager is the server-side apply field manager of test setup writes.
const FieldManager = "agentsandbox-tests"

var (
	once    sync.Once
	cluster *Cluster
	err     error

	// firstUse is what the package starts on the cluster the first time a
	// test asks for it (OnFirstUse), and started its outcome.
	firstUse     func(*Cluster) error
	firstUseOnce sync.Once
	started      error
)

// OnFirstUse has start run once, on the cluster, when the first test of the
// package asks for it (Get): the controllers a package's tests need start
// then, not in TestMain, so a run of tests that need no cluster (make unit,
// or go test -run on a pure test) never connects to one. Call it from
// TestMain, before m.Run.
func OnFirstUse(start func(*Cluster) error) { firstUse = start }

// Cluster is the API server the tests of one package run against.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Local is true for the kwok cluster of hack/cluster.sh, whose files
	// the tests may read.
	Local bool
	// AuditLog is the local cluster's audit log; empty for other clusters.
	AuditLog string
	// Config is the admin REST config.
	Config *rest.Config
	// Client is an admin client with the project's scheme.
	Client client.Client
}

// Get returns the shared cluster, starting the local one on first use when
// KUBECONFIG is unset. A cluster that cannot be reached fails the test: a
// test that needs the API server never passes without one. Only where no
// cluster is offered on purpose (TestClustersEnv=NoCluster, make unit) does
// the test skip, saying so.
func Get(t testing.TB) *Cluster {
	t.Helper()
	c, err := Connect()
	if errors.Is(err, ErrNoCluster) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatalf("test cluster: %v", err)
	}
	firstUseOnce.Do(func() {
		if firstUse != nil {
			started = firstUse(c)
		}
	})
	if started != nil {
		t.Fatalf("test cluster: %v", started)
	}
	return c
}

// NoCluster is the value of TestClustersEnv that offers no cluster at all:
// make unit runs the tests that need none, and those that need one skip.
const NoCluster = "none"

// ErrNoCluster is Connect's answer when TestClustersEnv is NoCluster.
var ErrNoCluster = errors.New("this test needs a cluster, and " + TestClustersEnv + "=" + NoCluster + " offers none (make unit); make test runs it")

// Connect is Get for TestMain, where there is no testing.TB yet.
func Connect() (*Cluster, error) {
	once.Do(func() { cluster, err = connect() })
	return cluster, err
}

// TestClustersEnv lists the names of local clusters (hack/cluster.sh,
// AGENTSANDBOX_CLUSTER) a test package may take, comma-separated; make test
// sets it. It takes precedence over KUBECONFIG.
const TestClustersEnv = "AGENTSANDBOX_TEST_CLUSTERS"

// NodeCluster is the local cluster the real node (hack/node.sh) joins.
const NodeCluster = "agentsandbox"

var only string

// Only restricts the clusters of TestClustersEnv this package may take to
// name (NodeCluster for tests of the real node). Call it from TestMain,
// before Connect.
func Only(name string) { only = name }

// candidate is a cluster a package may take.
type candidate struct {
	// name is the local cluster's name; empty for a KUBECONFIG of the user's.
	name       string
	kubeconfig string
}

func connect() (*Cluster, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	local, err := clusterScript(root, "", "kubeconfig")
	if err != nil {
		return nil, err
	}
	candidates, err := offered(root, local)
	if err != nil {
		return nil, err
	}
	chosen, err := take(candidates)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Kubeconfig: chosen.kubeconfig}
	if c.Local = chosen.name != "" || chosen.kubeconfig == local; c.Local {
		if c.AuditLog, err = clusterScript(root, chosen.name, "audit-log"); err != nil {
			return nil, err
		}
	}
	// What the tests start (OpenTofu, the CLI, kubectl, hack/cluster.sh
	// restart) acts on the same cluster.
	if err := os.Setenv("KUBECONFIG", chosen.kubeconfig); err != nil {
		return nil, err
	}
	if chosen.name != "" {
		if err := os.Setenv("AGENTSANDBOX_CLUSTER", chosen.name); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %s: %w", c.Kubeconfig, err)
	}
	// Tests create objects in bursts; client-side throttling would only
	// measure the limiter.
	cfg.QPS, cfg.Burst = 500, 1000
	c.Config = cfg
	if c.Client, err = client.New(cfg, client.Options{Scheme: kubescheme.Scheme}); err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := InstallCRDs(ctx, c.Client); err != nil {
		return nil, err
	}
	if err := applyManifests(ctx, c.Client, installManifests(root)...); err != nil {
		return nil, err
	}
	return c, nil
}

// installManifests are the parts of config/ a cluster needs besides the CRDs
// for the controllers to work as installed: the namespace, RBAC and the
// admission policies (not the Deployment: tests run the reconciler
// in-process).
func installManifests(root string) []string {
	files := []string{filepath.Join(root, "config", "manager", "namespace.yaml")}
	for _, dir := range []string{"rbac", "admission"} {
		matches, _ := filepath.Glob(filepath.Join(root, "config", dir, "*.yaml"))
		files = append(files, matches...)
	}
	return files
}

// applyManifests server-side applies every object of the YAML files.
func applyManifests(ctx context.Context, c client.Client, files ...string) error {
	for _, file := range files {
		objs, err := ReadManifests(file)
		if err != nil {
			return err
		}
		for _, u := range objs {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("%s: failed to apply %s %s: %w", file, u.GetKind(), u.GetName(), err)
			}
		}
	}
	return nil
}

// ReadManifests decodes every non-empty YAML document of file.
func ReadManifests(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return config.ParseManifests(file, data)
}

// InstallCRDs applies the generated CRDs and waits until they are served.
func InstallCRDs(ctx context.Context, c client.Client) error {
	crds, err := config.CRDs()
	if err != nil {
		return err
	}
	for _, want := range crds {
		want.APIVersion = apiextensionsv1.SchemeGroupVersion.String()
		want.Kind = "CustomResourceDefinition"
		u, err := toUnstructured(want)
		if err != nil {
			return err
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("failed to apply CRD %s: %w", want.Name, err)
		}
	}
	for _, want := range crds {
		var lastErr error
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if lastErr = c.Get(ctx, client.ObjectKey{Name: want.Name}, got); lastErr != nil {
				return false, nil
			}
			if !established(got) {
				lastErr = errors.New("not Established yet")
				return false, nil
			}
			lastErr = admitted(ctx, c, want)
			return lastErr == nil, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not served: %w (last error: %v)", want.Name, err, lastErr)
		}
	}
	return nil
}

// admitted is nil once the API server takes a kind's objects through
// admission: a dry-run create of one with an empty spec gets past the mutating
// admission policies (config/admission) to validation, whose refusal is
// the answer wanted. Established comes first: discovery lists a new kind a
// moment later (the client answers "no matches for kind"), and the
// policies' type converter, which reads the OpenAPI every 5 s, later still
// (the API server answers 503 "Resource kind … not found"). A test's first
// claim just after hack/cluster.sh up met the second.
func admitted(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) error {
	probe := &unstructured.Unstructured{}
	probe.SetAPIVersion(crd.Spec.Group + "/" + crd.Spec.Versions[0].Name)
	probe.SetKind(crd.Spec.Names.Kind)
	probe.SetName("admission-probe")
	probe.Object["spec"] = map[string]any{} // what the policies match
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		probe.SetNamespace(metav1.NamespaceDefault)
	}
	err := c.Create(ctx, probe, client.DryRunAll)
	var status apierrors.APIStatus
	if err == nil || errors.As(err, &status) && !apierrors.IsServiceUnavailable(err) {
		return nil
	}
	return err
}

// established says whether the API server has accepted crd's names.
func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// Name returns a name unique to this test run: prefix, a dash and eight hex
// digits, so parallel tests and repeated runs never collide.
func Name(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// RepoRoot finds the repository root (the directory of go.mod) from the
// test's working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "cluster.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no repository root (with hack/cluster.sh) above the working directory")
		}
		dir = parent
	}
}

// clusterScript runs hack/cluster.sh with one argument on the local cluster
// name ("": the one AGENTSANDBOX_CLUSTER names, by default the default one)
// and returns its trimmed standard output; progress goes to the test's
// stderr.
func clusterScript(root, name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), args...)
	if name != "" {
		cmd.Env = append(os.Environ(), "AGENTSANDBOX_CLUSTER="+name)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/cluster.sh %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// toolBins remembers ToolBin's answers: the directory of a pinned version
// does not move while tests run, and a benchmark timing kubectl runs should
// not time tools/build.sh as well.
var toolBins sync.Map

// ToolBin returns the directory of a pinned tool's binaries (kube, tofu,
// ...), building it with tools/build.sh if the cache does not have it yet.
func ToolBin(tool string) (string, error) {
	if dir, ok := toolBins.Load(tool); ok {
		return dir.(string), nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := exec.Command(filepath.Join(root, "tools", "build.sh"), "--print-bin", tool).Output()
	if err != nil {
		return "", fmt.Errorf("tools/build.sh --print-bin %s: %w", tool, err)
	}
	bin := strings.TrimSpace(string(dir))
	toolBins.Store(tool, bin)
	return bin, nil
}

// Kubectl runs the kubectl built by tools/build.sh against the cluster and
// returns its standard output; a failure fails the test with kubectl's
// standard error.
func (c *Cluster) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	// A private discovery cache: the shared one under ~/.kube/cache may
	// predate the CRDs (a recreated cluster reuses host and port).
	return c.KubectlCached(t, t.TempDir(), args...)
}

// KubectlCached is Kubectl with the discovery cache in cacheDir, so a
// series of kubectl runs shares one, as a user's runs do.
func (c *Cluster) KubectlCached(t testing.TB, cacheDir string, args ...string) string {
	t.Helper()
	dir, err := ToolBin("kube")
	if err != nil {
		t.Fatalf("locating kubectl: %v", err)
	}
	flags := []string{"--kubeconfig", c.Kubeconfig, "--cache-dir", cacheDir}
	cmd := exec.Command(filepath.Join(dir, "kubectl"), append(flags, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// Node creates a node of the test's own, with labels and taints, that kwok
// reports Ready on the local cluster (another cluster leaves it NotReady),
// and deletes it when the test ends. Tests that need scheduling or node
// labels use their own nodes so they never disturb each other. Give it the
// taints its node pool will put on it: an untainted node takes other
// tests' pods until the pool's controller taints it, and a pod left on a
// node deleted at the end of the test holds its namespace's deletion until
// the pod garbage collector removes it, a minute or more later.
func (c *Cluster) Node(t testing.TB, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	t.Helper()
	name := Name("node")
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("500"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	all := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"}
	for k, v := range labels {
		all[k] = v
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: all,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Allocatable: capacity, Capacity: capacity,
			NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake"},
		},
	}
	if err := c.Client.Create(context.Background(), n); err != nil {
		t.Fatalf("create node: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Client.Delete(context.Background(), n); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete node %s: %v", n.Name, err)
		}
	})
	return n
}

// Eventually polls cond every 100ms for up to a minute and fails the test
// if it never holds; cond also says what it saw, for the failure message.
func Eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			ok, seen := cond()
			last = seen
			return ok, nil
		})
	if err != nil {
		t.Fatalf("timed out waiting for %s; last seen: %s", what, last)
	}
}

// SandboxGone waits until the sandbox called name is gone from the
// cluster: deleted, and its finalizer done.
func (c *Cluster) SandboxGone(t testing.TB, name string) {
	t.Helper()
	Eventually(t, "sandbox "+name+" deleted", func() (bool, string) {
		err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, &v1.Sandbox{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// WaitNoTerminatingNamespaces waits until the namespace controller has
// finished deleting namespaces: each costs it dozens of requests, which
// would load the API server while a benchmark measures.
func (c *Cluster) WaitNoTerminatingNamespaces(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(time.Second) {
		list := &corev1.NamespaceList{}
		if err := c.Client.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		terminating := 0
		for _, ns := range list.Items {
			if ns.DeletionTimestamp != nil {
				terminating++
			}
		}
		if terminating == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d namespaces still terminating after 10 minutes", terminating)
		}
	}
}

// Restart stops every process of the local cluster, etcd and the API
// server among them, and starts them again on the same data, returning
// once the API server is ready. Other clusters are not this suite's to
// restart: the test skips there.
func (c *Cluster) Restart(t testing.TB) { c.Outage(t, 0) }

// Outage kills etcd and the API server of the local cluster (SIGKILL, as
// a crash would), keeps them down for d and starts them again on the same
// data, returning once the API server is ready again.
func (c *Cluster) Outage(t testing.TB, d time.Duration) {
	t.Helper()
	if !c.Local {
		t.Skip("stopping the API server needs the local cluster of hack/cluster.sh")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clusterScript(root, "", "restart", strconv.Itoa(int(d.Seconds()))); err != nil {
		t.Fatal(err)
	}
	// The admission policies of Sandboxes need the CRD's schema, which a
	// restarted API server loads a few seconds after it is ready: until
	// then it answers a create 503 (a client retries), which a test's
	// first create must not take for a failure of what it tests.
	probe := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: Name("admitted")}, Spec: v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: "any"}}}
	var last error
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the restarted API server does not admit a Sandbox after a minute: %v", last)
	}
}

// FreeAddr is a loopback address nothing listens on, for a server a test
// starts (a reconciler's health endpoints).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// RunLabel marks the objects of one test run, so one list or delete finds
// them all.
const RunLabel = "agentsandbox.test/run"

// TemplateYAML declares the SandboxTemplate name, labelled RunLabel: run,
// as a file in a Git repository or a directory holds it.
func TemplateYAML(name, run string) string {
	return fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s\n  labels: {%s: %s}\nspec:\n  image: python:3.12\n", name, RunLabel, run)
}

// TemplateFiles adds n template declarations to files, one a file under
// dir, named <run>-<dir>-<i>: a repository of many objects for a sync.
func TemplateFiles(files map[string]string, dir string, n int, run string) map[string]string {
	for i := range n {
		files[fmt.Sprintf("%s/%04d.yaml", dir, i)] = TemplateYAML(fmt.Sprintf("%s-%s-%04d", run, dir, i), run)
	}
	return files
}
