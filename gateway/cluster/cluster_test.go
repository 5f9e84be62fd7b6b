package cluster_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gateway/cluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// TestDirectoryFindsTheSandboxBehindAnAddress: a sandbox pod's address
// leads to its Sandbox, owner and template; a warm member's (no Sandbox
// names its namespace) to its template alone; an address no sandbox pod
// holds, and a pod that is not a sandbox's, to nothing.
func TestDirectoryFindsTheSandboxBehindAnAddress(t *testing.T) {
	tc := testcluster.Get(t)
	c, ctx := tc.Client, context.Background()
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("gw")},
		Spec: v1.SandboxTemplateSpec{Image: "python:3.12", Network: v1.Network{
			Egress: []v1.EgressRule{{Hosts: []string{"pypi.org"}}},
		}},
	}
	create(t, c, tpl)
	sbx := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("gw")},
		Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}, Owner: "alice@example.com"},
	}
	create(t, c, sbx)
	owned := environment.NamespaceName(sbx.Name)
	sbx.Status.Namespace = owned
	if err := c.Status().Update(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	member := testcluster.Name("sandbox-wp-gw")
	sandboxIP := runPod(t, c, owned, environment.PodName, tpl.Name)
	memberIP := runPod(t, c, member, environment.PodName, tpl.Name)
	otherIP := runPod(t, c, testcluster.Name("plain"), "web", tpl.Name)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir, err := cluster.NewDirectory(ctx, tc.Config)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := dir.Client(sandboxIP)
	if !ok || got.Sandbox != sbx.Name || got.Owner != sbx.Spec.Owner || got.Network == nil || got.Network.Egress[0].Hosts[0] != "pypi.org" {
		t.Errorf("the sandbox's address: %+v, %v", got, ok)
	}
	if got, ok := dir.Client(memberIP); !ok || got.Sandbox != member || got.Owner != "" || got.Network == nil {
		t.Errorf("the warm member's address: %+v, %v", got, ok)
	}
	if got, ok := dir.Client(otherIP); ok {
		t.Errorf("a pod that is no sandbox's is known: %+v", got)
	}
	if got, ok := dir.Client(netip.MustParseAddr("192.0.2.77")); ok {
		t.Errorf("an address no pod holds is known: %+v", got)
	}
}

// runPod creates a namespace and a managed pod in it, waits for kwok to
// give it an address and returns it.
func runPod(t *testing.T, c client.Client, namespace, name, template string) netip.Addr {
	t.Helper()
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			v1.LabelManagedBy: v1.ManagedByValue, v1.LabelTemplate: template,
		}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "c", Image: "python:3.12"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if err := createPod(context.Background(), c, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), pod) })
	var ip netip.Addr
	testcluster.Eventually(t, "pod "+namespace+"/"+name+" running with an address", func() (bool, string) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		var err error
		ip, err = netip.ParseAddr(pod.Status.PodIP)
		return err == nil && pod.Status.Phase == corev1.PodRunning, string(pod.Status.Phase) + " " + pod.Status.PodIP
	})
	return ip
}

// TestSecretsAreReadAgainAfterTheirTTL: a credential is read from its
// Secret, kept for the TTL, then read again (a rotation shows); a missing
// key is an error naming the Secret and the key.
func TestSecretsAreReadAgainAfterTheirTTL(t *testing.T) {
	c, ctx := testcluster.Get(t).Client, context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: v1.SystemNamespace, Name: testcluster.Name("credential")},
		Data:       map[string][]byte{"key": []byte("first")},
	}
	create(t, c, secret)
	secrets := cluster.NewSecrets(c, 500*time.Millisecond)
	ref := v1.SecretKeyReference{Name: secret.Name, Key: "key"} // the namespace defaults as the CRD's does
	if got, err := secrets.Credential(ctx, ref); err != nil || string(got) != "first" {
		t.Fatalf("credential: %q, %v", got, err)
	}
	patch := client.MergeFrom(secret.DeepCopy())
	secret.Data["key"] = []byte("second")
	if err := c.Patch(ctx, secret, patch); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, "the rotated value", func() (bool, string) {
		got, err := secrets.Credential(ctx, ref)
		return err == nil && string(got) == "second", string(got)
	})
	ref.Key = "missing"
	_, err := secrets.Credential(ctx, ref)
	if err == nil || !strings.Contains(err.Error(), secret.Name) || !strings.Contains(err.Error(), `"missing"`) || strings.Contains(err.Error(), "second") {
		t.Errorf("a missing key: %v", err)
	}
}

// createPod creates pod, waiting out the refusals of a namespace too new
// to hold one (environment.NamespaceSettling).
func createPod(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, pod)
		if _, settling := environment.NamespaceSettling(err); settling {
			return false, nil
		}
		return err == nil, err
	})
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}
