package sandbox_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// TestEgressByNameGoesThroughTheGateway: a template with hosts, an endpoint
// and a service rule waits for the egress gateway's Service, then runs with
// a policy that reaches the gateway's pods and the model Service's pods
// (at their target port) and nothing else by those rules, and with the
// proxy variables and the endpoint's address in its environment. The
// policy follows the model Service when its selector changes.
func TestEgressByNameGoesThroughTheGateway(t *testing.T) {
	c := testcluster.Get(t).Client
	ctx := context.Background()
	models := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("models")}}
	create(t, c, models)
	vllm := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: models.Name, Name: "vllm"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "vllm"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8000)}, {Name: "metrics", Port: 9090}},
		},
	}
	create(t, c, vllm)
	tpl := newTemplate(t, c, func(tpl *v1.SandboxTemplate) {
		tpl.Spec.Network = v1.Network{
			Egress: []v1.EgressRule{
				{Hosts: []string{"pypi.org", "*.pythonhosted.org"}, Ports: []v1.NetworkPort{{Port: 443}}},
				{Service: &v1.ServiceReference{Namespace: models.Name, Name: "vllm"}, Ports: []v1.NetworkPort{{Port: 80}}},
				{CIDR: "140.82.112.0/20"},
			},
			Endpoints: []v1.Endpoint{{Name: "open-ai", URL: "https://api.openai.com/v1", Credential: &v1.EndpointCredential{
				SecretRef: v1.SecretKeyReference{Name: "openai", Key: "api-key"},
			}}},
		}
	})
	sbx := newSandbox(t, c, tpl, nil)
	waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonServiceNotFound, "the egress gateway", testGateway.String())

	gateway := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testGateway.Namespace, Name: testGateway.Name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": testGateway.Name},
			Ports:    []corev1.ServicePort{{Name: "proxy", Port: 3128, TargetPort: intstr.FromString("proxy")}},
		},
	}
	create(t, c, gateway)
	got := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	assertIsolated(t, c, got)

	np := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: got.Status.Namespace, Name: "sandbox"}, np); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		peerKey(testGateway.Namespace, gateway.Spec.Selector): "TCP/proxy",
		peerKey(models.Name, vllm.Spec.Selector):              "TCP/8000", // the Service's port 80, after translation
	}
	if diff := podPeers(np); !maps.Equal(diff, want) {
		t.Errorf("policy's pod peers = %v, want %v", diff, want)
	}
	for _, rule := range np.Spec.Egress {
		for _, peer := range rule.To {
			if peer.IPBlock != nil && peer.IPBlock.CIDR == "0.0.0.0/0" {
				t.Errorf("a hosts rule opened 0.0.0.0/0: %+v", rule)
			}
		}
	}

	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: got.Status.Namespace, Name: environment.PodName}, pod); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	proxy := fmt.Sprintf("http://%s:3128", gateway.Spec.ClusterIP)
	for _, name := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if env[name] != proxy {
			t.Errorf("%s = %q, want %q", name, env[name], proxy)
		}
	}
	if got, want := env[environment.EndpointVariable("open-ai")], proxy+"/endpoints/open-ai"; got != want || environment.EndpointVariable("open-ai") != "AGENTSANDBOX_ENDPOINT_OPEN_AI" {
		t.Errorf("AGENTSANDBOX_ENDPOINT_OPEN_AI = %q, want %q", got, want)
	}
	noProxy := strings.Split(env["NO_PROXY"], ",")
	for _, bypass := range []string{gateway.Spec.ClusterIP, vllm.Spec.ClusterIP, "vllm." + models.Name + ".svc", "140.82.112.0/20", "localhost"} {
		if !slices.Contains(noProxy, bypass) {
			t.Errorf("NO_PROXY %q lacks %s", env["NO_PROXY"], bypass)
		}
	}

	// The model's pods change labels: the policy follows the Service.
	patch := client.MergeFrom(vllm.DeepCopy())
	vllm.Spec.Selector = map[string]string{"app": "vllm", "track": "stable"}
	if err := c.Patch(ctx, vllm, patch); err != nil {
		t.Fatal(err)
	}
	want[peerKey(models.Name, vllm.Spec.Selector)] = want[peerKey(models.Name, map[string]string{"app": "vllm"})]
	delete(want, peerKey(models.Name, map[string]string{"app": "vllm"}))
	testcluster.Eventually(t, "the policy follows the Service's new selector", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
			return false, err.Error()
		}
		peers := podPeers(np)
		return maps.Equal(peers, want), fmt.Sprint(peers)
	})
}

// TestEgressServiceWithoutSelectorIsRefused: a Service a policy cannot
// follow (no selector) stalls the sandbox, saying to use a cidr rule.
func TestEgressServiceWithoutSelectorIsRefused(t *testing.T) {
	c := testcluster.Get(t).Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("external")}}
	create(t, c, ns)
	create(t, c, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}},
	})
	tpl := newTemplate(t, c, func(tpl *v1.SandboxTemplate) {
		tpl.Spec.Network.Egress = []v1.EgressRule{{Service: &v1.ServiceReference{Namespace: ns.Name, Name: "db"}}}
	})
	sbx := newSandbox(t, c, tpl, nil)
	waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonInvalidEgress, "selects no pods", "cidr rule")
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}

// podPeers maps each pod peer of the policy's egress (namespace and pod
// labels) to its ports.
func podPeers(np *networkingv1.NetworkPolicy) map[string]string {
	out := map[string]string{}
	for _, rule := range np.Spec.Egress {
		for _, peer := range rule.To {
			if peer.PodSelector == nil || peer.NamespaceSelector == nil {
				continue
			}
			ns := peer.NamespaceSelector.MatchLabels[corev1.LabelMetadataName]
			if ns == "kube-system" {
				continue // cluster DNS
			}
			var ports []string
			for _, p := range rule.Ports {
				ports = append(ports, string(*p.Protocol)+"/"+p.Port.String())
			}
			out[peerKey(ns, peer.PodSelector.MatchLabels)] = strings.Join(ports, ",")
		}
	}
	return out
}

func peerKey(namespace string, selector map[string]string) string {
	return namespace + fmt.Sprint(selector)
}
