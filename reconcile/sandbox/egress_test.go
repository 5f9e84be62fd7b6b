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

	gateway := newGateway(t, c)
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
	env := envOf(pod)
	proxy := proxyURL(gateway)
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

// TestGatewayMoveReplacesMembersAndWarnsSandboxes: the egress gateway's
// Service recreated with another cluster IP no longer answers at the
// sandbox pod's proxy variables, fixed when the pod was made.
func TestGatewayMoveReplacesMembersAndWarnsSandboxes(t *testing.T) {
	c := testcluster.Get(t).Client
	assertMoveFollowed(t, c, newGateway(t, c), moved{
		network: v1.Network{Egress: []v1.EgressRule{{Hosts: []string{"pypi.org"}, Ports: []v1.NetworkPort{{Port: 443}}}}},
		given: func(pod *corev1.Pod) string {
			// The address is the processes' proxy, recorded beside it.
			recorded, proxy := pod.Annotations[v1.AnnotationEgressGateway], envOf(pod)["HTTPS_PROXY"]
			if recorded != proxy {
				return fmt.Sprintf("HTTPS_PROXY %q, recorded %q", proxy, recorded)
			}
			return proxy
		},
		address: proxyURL,
		reason:  v1.ReasonEgressGatewayMoved,
		event: func(before, after string) string {
			return "answers at " + after + " now, but this sandbox's processes were given " + before
		},
	})
}

// TestServiceMoveReplacesMembersAndWarnsSandboxes: a service rule's
// Service recreated with another cluster IP no longer answers at the
// /etc/hosts entry a sandbox without cluster DNS was given for its names.
func TestServiceMoveReplacesMembersAndWarnsSandboxes(t *testing.T) {
	c := testcluster.Get(t).Client
	models := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("models")}}
	create(t, c, models)
	vllm := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: models.Name, Name: "vllm"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "vllm"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	create(t, c, vllm)
	name := "vllm." + models.Name
	assertMoveFollowed(t, c, vllm, moved{
		network: v1.Network{Egress: []v1.EgressRule{{Service: &v1.ServiceReference{Namespace: models.Name, Name: "vllm"}}}},
		given: func(pod *corev1.Pod) string {
			for _, alias := range pod.Spec.HostAliases {
				if slices.Contains(alias.Hostnames, name) {
					return alias.IP
				}
			}
			return ""
		},
		address: func(svc *corev1.Service) string { return svc.Spec.ClusterIP },
		reason:  v1.ReasonEgressServiceMoved,
		event: func(before, after string) string {
			return "Service " + models.Name + "/vllm answers at " + after + " now, but this sandbox's /etc/hosts gives its names " + before
		},
	})
}

// moved is an address a sandbox pod is given from a Service, which
// assertMoveFollowed recreates.
type moved struct {
	// network is the template's, going to the Service.
	network v1.Network
	// given reads the address a pod was given; address says which one a
	// pod made now should be given.
	given   func(*corev1.Pod) string
	address func(*corev1.Service) string
	// reason and event are the Warning a running sandbox gets, the
	// event's words from the two addresses.
	reason string
	event  func(before, after string) string
}

// assertMoveFollowed recreates svc with another cluster IP and checks that
// the pool replaces the members given the old address (under OnReplenish,
// which keeps members of an earlier template), that a claim gets the new
// one, and that a running sandbox given the old one gets a Warning event
// saying so and what to do.
func assertMoveFollowed(t *testing.T, c client.Client, svc *corev1.Service, m moved) {
	t.Helper()
	tpl := newTemplate(t, c, func(tpl *v1.SandboxTemplate) { tpl.Spec.Network = m.network })
	pool := newPool(t, c, tpl, 2, nil)
	waitPoolReady(t, c, pool, 2)
	running := newSandbox(t, c, tpl, claimFrom(pool))
	waitCondition(t, c, running, metav1.ConditionTrue, v1.ReasonPodReady)
	waitPoolReady(t, c, pool, 2)
	before := m.address(svc)
	// The pool's status can still count the claimed member while the
	// member replacing it has its namespace and not yet its pod.
	var old map[string]string
	testcluster.Eventually(t, "the pool's two members, each given the Service's address", func() (bool, string) {
		var err error
		if old, err = memberAddresses(t, c, pool, m.given); err != nil {
			return false, err.Error()
		}
		for name, given := range old {
			if given != before {
				return false, fmt.Sprintf("member %s was given %q, want %q", name, given, before)
			}
		}
		return len(old) == 2, fmt.Sprint(old)
	})

	after := m.address(recreateService(t, c, svc))
	hasEvent(t, c, running, m.reason, m.event(before, after))
	testcluster.Eventually(t, "the pool's members given the Service's new address", func() (bool, string) {
		members, err := memberAddresses(t, c, pool, m.given)
		if err != nil {
			return false, err.Error()
		}
		var given []string
		for name, address := range members {
			if _, kept := old[name]; kept || address != after {
				given = append(given, name+": "+address)
			}
		}
		return len(given) == 0, strings.Join(given, ", ")
	})
	waitPoolReady(t, c, pool, 2)

	claim := newSandbox(t, c, tpl, claimFrom(pool))
	got := waitCondition(t, c, claim, metav1.ConditionTrue, v1.ReasonPodReady)
	if given := m.given(memberPod(t, c, got.Status.Namespace)); given != after {
		t.Errorf("a claim after the move was given %q, want %q", given, after)
	}
}

// newGateway creates the egress gateway's Service (testGateway).
func newGateway(t *testing.T, c client.Client) *corev1.Service {
	t.Helper()
	gateway := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testGateway.Namespace, Name: testGateway.Name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": testGateway.Name},
			Ports:    []corev1.ServicePort{{Name: "proxy", Port: 3128, TargetPort: intstr.FromString("proxy")}},
		},
	}
	create(t, c, gateway)
	return gateway
}

// recreateService deletes svc and creates it again until the API server
// gives it another cluster IP than it had.
func recreateService(t *testing.T, c client.Client, svc *corev1.Service) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	for {
		if err := c.Delete(ctx, svc); err != nil {
			t.Fatal(err)
		}
		again := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}, Spec: corev1.ServiceSpec{
			Selector: svc.Spec.Selector, Ports: svc.Spec.Ports,
		}}
		testcluster.Eventually(t, "Service "+svc.Name+" created again", func() (bool, string) {
			err := c.Create(ctx, again)
			return err == nil, errString(err)
		})
		if again.Spec.ClusterIP != svc.Spec.ClusterIP {
			return again
		}
		svc = again
	}
}

// memberPod is the sandbox pod in namespace.
func memberPod(t *testing.T, c client.Client, namespace string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: environment.PodName}, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// memberAddresses is the address each of pool's available members' pods
// was given (read by given), by namespace; an error while one has no pod
// yet.
func memberAddresses(t *testing.T, c client.Client, pool *v1.WarmPool, given func(*corev1.Pod) string) (map[string]string, error) {
	out := map[string]string{}
	for _, ns := range availableMembers(t, c, pool) {
		pod := &corev1.Pod{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns.Name, Name: environment.PodName}, pod); err != nil {
			return nil, err
		}
		out[ns.Name] = given(pod)
	}
	return out, nil
}

// proxyURL is the address sandboxes are given for the gateway.
func proxyURL(gateway *corev1.Service) string {
	return fmt.Sprintf("http://%s:3128", gateway.Spec.ClusterIP)
}

// envOf is the sandbox container's environment.
func envOf(pod *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
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
