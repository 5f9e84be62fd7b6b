package environment

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

func TestPodEnvLeavesTheTemplatesOwnVariables(t *testing.T) {
	gateway := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []corev1.ServicePort{{Port: 3128}}}}
	n := v1.Network{Egress: []v1.EgressRule{{Hosts: []string{"pypi.org"}}}, Endpoints: []v1.Endpoint{{Name: "openai"}}}
	env := Egress{Gateway: gateway}.podEnv(n, []v1.EnvVar{{Name: "NO_PROXY", Value: "internal.example"}})
	names := map[string]string{}
	for _, e := range env {
		names[e.Name] = e.Value
	}
	if _, set := names["NO_PROXY"]; set {
		t.Errorf("the template's NO_PROXY is overridden: %v", env)
	}
	if names["HTTPS_PROXY"] != "http://10.96.0.9:3128" || names["AGENTSANDBOX_ENDPOINT_OPENAI"] != "http://10.96.0.9:3128/endpoints/openai" {
		t.Errorf("env = %v", env)
	}
	if got := (Egress{}).podEnv(n, nil); got != nil {
		t.Errorf("without a gateway the pod gets %v", got)
	}
}

func TestMovedReadsTheAddressesThePodWasGiven(t *testing.T) {
	gateway := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []corev1.ServicePort{{Port: 3128}}}}
	ref := v1.ServiceReference{Namespace: "models", Name: "vllm"}
	service := func(clusterIP string) map[v1.ServiceReference]*corev1.Service {
		return map[v1.ServiceReference]*corev1.Service{ref: {Spec: corev1.ServiceSpec{ClusterIP: clusterIP}}}
	}
	given := func(address string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1.AnnotationEgressGateway: address}}}
	}
	hosts := func(ip string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{HostAliases: []corev1.HostAlias{
			{IP: "10.96.0.77", Hostnames: []string{"other.models"}},
			{IP: ip, Hostnames: serviceNames(ref)},
		}}}
	}
	for _, tt := range []struct {
		name   string
		egress Egress
		pod    *corev1.Pod
		want   []Move
	}{
		{"the gateway's address it has", Egress{Gateway: gateway}, given("http://10.96.0.9:3128"), nil},
		{"an earlier address of the gateway", Egress{Gateway: gateway}, given("http://10.96.0.4:3128"),
			[]Move{{Given: "http://10.96.0.4:3128", Current: "http://10.96.0.9:3128"}}},
		{"no gateway address recorded", Egress{Gateway: gateway}, &corev1.Pod{}, nil},
		{"no pod yet", Egress{Gateway: gateway, Services: service("10.96.0.5")}, nil, nil},
		{"the template no longer goes through the gateway", Egress{}, given("http://10.96.0.4:3128"), nil},
		{"the Service's address it has", Egress{Services: service("10.96.0.5")}, hosts("10.96.0.5"), nil},
		{"an earlier address of the Service", Egress{Services: service("10.96.0.5")}, hosts("10.96.0.3"),
			[]Move{{Service: &ref, Given: "10.96.0.3", Current: "10.96.0.5"}}},
		{"the Service recreated headless", Egress{Services: service(corev1.ClusterIPNone)}, hosts("10.96.0.3"),
			[]Move{{Service: &ref, Given: "10.96.0.3"}}},
		{"no hosts entry (cluster DNS allowed)", Egress{Services: service("10.96.0.5")}, &corev1.Pod{}, nil},
		{"the template no longer names the Service", Egress{}, hosts("10.96.0.3"), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.egress.Moved(tt.pod)); diff != "" {
				t.Errorf("Moved (-want +got):\n%s", diff)
			}
		})
	}
	pod := Blueprint{egress: Egress{Gateway: gateway}, template: &v1.SandboxTemplate{}}.Pod()
	if got := pod.Annotations[v1.AnnotationEgressGateway]; got != "http://10.96.0.9:3128" {
		t.Errorf("a pod made now records %q", got)
	}
}

func TestUsesServiceNamesTheGatewayOnlyForHostsAndEndpoints(t *testing.T) {
	gateway := types.NamespacedName{Namespace: "agentsandbox-system", Name: "egress-gateway"}
	vllm := types.NamespacedName{Namespace: "models", Name: "vllm"}
	rule := v1.EgressRule{Service: &v1.ServiceReference{Namespace: "models", Name: "vllm"}}
	for _, tt := range []struct {
		name string
		n    v1.Network
		key  types.NamespacedName
		want bool
	}{
		{"a service rule's Service", v1.Network{Egress: []v1.EgressRule{rule}}, vllm, true},
		{"another Service of the same name elsewhere", v1.Network{Egress: []v1.EgressRule{rule}}, types.NamespacedName{Namespace: "other", Name: "vllm"}, false},
		{"the gateway, for a hosts rule", v1.Network{Egress: []v1.EgressRule{{Hosts: []string{"pypi.org"}}}}, gateway, true},
		{"the gateway, for an endpoint", v1.Network{Endpoints: []v1.Endpoint{{Name: "openai"}}}, gateway, true},
		{"the gateway, for a template that never goes through it", v1.Network{Egress: []v1.EgressRule{rule}}, gateway, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := UsesService(tt.n, tt.key, gateway); got != tt.want {
				t.Errorf("UsesService = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHostsAndServiceRulesLeaveTheGateItsProof(t *testing.T) {
	// No ports: every port, but through the gateway or to a Service's
	// pods, never to a node's kubelet.
	n := v1.Network{Egress: []v1.EgressRule{{Hosts: []string{"pypi.org"}}, {Service: &v1.ServiceReference{Namespace: "m", Name: "s"}}}}
	if !GateProves(n) {
		t.Error("a hosts or service rule of every port keeps the gate from proving the policy")
	}
	n.Egress = append(n.Egress, v1.EgressRule{CIDR: "0.0.0.0/0"})
	if GateProves(n) {
		t.Error("a cidr rule of every port may reach the kubelet's, yet the gate would prove with it")
	}
}

func TestTargetPortsTranslateTheServicesPorts(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Port: 80, TargetPort: intstr.FromInt32(8000), Protocol: corev1.ProtocolTCP},
		{Port: 443, TargetPort: intstr.FromString("https"), Protocol: corev1.ProtocolTCP},
		{Port: 9090, Protocol: corev1.ProtocolTCP}, // no target port: the same
	}}}
	str := func(rule []v1.NetworkPort) ([]string, *v1.NetworkPort) {
		ports, missing := targetPorts(svc, rule)
		var out []string
		for _, p := range ports {
			out = append(out, p.Port.String())
		}
		return out, missing
	}
	if got, _ := str(nil); !slices.Equal(got, []string{"8000", "https", "9090"}) {
		t.Errorf("all ports: %v", got)
	}
	if got, _ := str([]v1.NetworkPort{{Port: 400, EndPort: ptr.To[int32](500)}}); !slices.Equal(got, []string{"https"}) {
		t.Errorf("a range: %v", got)
	}
	if _, missing := str([]v1.NetworkPort{{Port: 8000}}); missing == nil || missing.Port != 8000 {
		t.Errorf("a port the Service does not expose (its target port) is not reported: %v", missing)
	}
}

// TestServicesByNameWithoutClusterDNS: a sandbox that may not ask the
// cluster resolver is given none (loopback, which refuses at once) and
// finds its service rules' Services by their DNS names in /etc/hosts; one
// that may ask gets the cluster's resolver and no entries. A headless
// Service (no cluster IP to give) gets none either.
func TestServicesByNameWithoutClusterDNS(t *testing.T) {
	vllm := v1.ServiceReference{Namespace: "models", Name: "vllm"}
	headless := v1.ServiceReference{Namespace: "models", Name: "db"}
	e := Egress{Services: map[v1.ServiceReference]*corev1.Service{
		vllm:     {Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20"}},
		headless: {Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
	}}
	n := v1.Network{Egress: []v1.EgressRule{{Service: &vllm}, {Service: &headless}, {CIDR: "192.0.2.0/24"}}}
	pod := Blueprint{egress: e, template: &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Network: n}}}.Pod()
	want := []corev1.HostAlias{{IP: "10.96.0.20", Hostnames: []string{"vllm.models", "vllm.models.svc", "vllm.models.svc.cluster.local"}}}
	if !slices.EqualFunc(pod.Spec.HostAliases, want, func(a, b corev1.HostAlias) bool { return a.IP == b.IP && slices.Equal(a.Hostnames, b.Hostnames) }) {
		t.Errorf("host aliases without cluster DNS = %+v, want %+v", pod.Spec.HostAliases, want)
	}
	if pod.Spec.DNSPolicy != corev1.DNSNone || pod.Spec.DNSConfig == nil || !slices.Equal(pod.Spec.DNSConfig.Nameservers, []string{"127.0.0.1"}) {
		t.Errorf("without cluster DNS the pod's resolver is %s %+v, want none but loopback", pod.Spec.DNSPolicy, pod.Spec.DNSConfig)
	}
	n.ClusterDNS = ptr.To(true)
	pod = Blueprint{egress: e, template: &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Network: n}}}.Pod()
	if len(pod.Spec.HostAliases) != 0 || pod.Spec.DNSPolicy != "" || pod.Spec.DNSConfig != nil {
		t.Errorf("with cluster DNS the pod gets host aliases %+v, DNS policy %q, config %+v; want the cluster's", pod.Spec.HostAliases, pod.Spec.DNSPolicy, pod.Spec.DNSConfig)
	}
}
