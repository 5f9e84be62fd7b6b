package environment

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// Egress is what a template's egress rules resolve to in the cluster: the
// egress gateway its hosts rules and endpoints go through, and the Services
// its service rules name. The NetworkPolicy and the pod's environment are
// derived from it, so they follow the Services as they are when the
// environment is built.
type Egress struct {
	// Gateway is the egress gateway's Service; nil when the template has no
	// hosts rule and no endpoint.
	Gateway *corev1.Service
	// Services are the Services of the template's service rules.
	Services map[v1.ServiceReference]*corev1.Service
}

// UsesGateway tells whether a sandbox of network reaches anything through
// the egress gateway: a hosts rule or an endpoint.
func UsesGateway(n v1.Network) bool {
	if len(n.Endpoints) > 0 {
		return true
	}
	return slices.ContainsFunc(n.Egress, func(r v1.EgressRule) bool { return len(r.Hosts) > 0 })
}

// UsesService tells whether a sandbox of network reaches the Service key:
// by a service rule, or as the egress gateway (gateway) its hosts rules and
// endpoints go through. Its pods, policy and environment follow that
// Service, so a change to it concerns the sandbox.
func UsesService(n v1.Network, key, gateway types.NamespacedName) bool {
	if key == gateway && UsesGateway(n) {
		return true
	}
	return slices.ContainsFunc(n.Egress, func(rule v1.EgressRule) bool {
		return rule.Service != nil && rule.Service.Namespace == key.Namespace && rule.Service.Name == key.Name
	})
}

// TemplatesUsing lists the templates whose sandboxes go to the Service key
// (UsesService), from c's cache: the ones a change to that Service
// concerns.
func TemplatesUsing(ctx context.Context, c client.Reader, key, gateway types.NamespacedName) ([]*v1.SandboxTemplate, error) {
	templates := &v1.SandboxTemplateList{}
	if err := c.List(ctx, templates, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list templates: %w", err)
	}
	var out []*v1.SandboxTemplate
	for i := range templates.Items {
		if UsesService(templates.Items[i].Spec.Network, key, gateway) {
			out = append(out, &templates.Items[i])
		}
	}
	return out, nil
}

// ResolveEgress reads the Services tpl's egress goes to: the egress gateway
// (gateway, the reconciler's --egress-gateway; empty when it runs without
// one) when a hosts rule or an endpoint needs it, and the Service of each
// service rule. A missing Service is a problem that heals when it is
// created; a Service without a selector cannot be followed by a policy.
func ResolveEgress(ctx context.Context, c client.Reader, tpl *v1.SandboxTemplate, gateway types.NamespacedName) (Egress, *problem.Problem, error) {
	var out Egress
	n := tpl.Spec.Network
	if UsesGateway(n) {
		if gateway.Name == "" {
			return out, problem.Stall(v1.ReasonInvalidEgress,
				"SandboxTemplate %q allows hosts or endpoints, which go through the egress gateway, but the reconciler runs without one (--egress-gateway)", tpl.Name), nil
		}
		svc, p, err := selectingService(ctx, c, gateway, "the egress gateway (--egress-gateway)")
		if p != nil || err != nil {
			return out, p, err
		}
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
			return out, problem.Stall(v1.ReasonInvalidEgress,
				"the egress gateway's Service %s has no cluster IP or no port; it must be a ClusterIP Service (config/gateway)", gateway), nil
		}
		out.Gateway = svc
	}
	for i, rule := range n.Egress {
		if rule.Service == nil {
			continue
		}
		ref := *rule.Service
		svc, p, err := selectingService(ctx, c, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name},
			fmt.Sprintf("SandboxTemplate %q's spec.network.egress[%d].service", tpl.Name, i))
		if p != nil || err != nil {
			return out, p, err
		}
		if _, missing := targetPorts(svc, rule.Ports); missing != nil {
			return out, problem.Stall(v1.ReasonInvalidEgress,
				"SandboxTemplate %q's spec.network.egress[%d].ports names port %d, which Service %s does not expose (it has %s)",
				tpl.Name, i, missing.Port, ref.Namespace+"/"+ref.Name, servicePorts(svc)), nil
		}
		if out.Services == nil {
			out.Services = map[v1.ServiceReference]*corev1.Service{}
		}
		out.Services[ref] = svc
	}
	return out, nil, nil
}

// selectingService reads a Service whose pods a NetworkPolicy can select.
func selectingService(ctx context.Context, c client.Reader, key types.NamespacedName, who string) (*corev1.Service, *problem.Problem, error) {
	svc := &corev1.Service{}
	if err := c.Get(ctx, key, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, problem.New(v1.ReasonServiceNotFound, "%s names Service %s, which does not exist", who, key), nil
		}
		return nil, nil, fmt.Errorf("failed to get Service %s: %w", key, err)
	}
	if len(svc.Spec.Selector) == 0 {
		return nil, problem.Stall(v1.ReasonInvalidEgress,
			"%s names Service %s, which selects no pods (no spec.selector), so no NetworkPolicy can follow it; allow its addresses with a cidr rule", who, key), nil
	}
	return svc, nil, nil
}

// targetPorts are the pod ports behind the Service ports a rule names (all
// of them when it names none): a NetworkPolicy sees connections after the
// service proxy has translated them. missing is a rule port no Service
// port matches.
func targetPorts(svc *corev1.Service, rulePorts []v1.NetworkPort) (out []networkingv1.NetworkPolicyPort, missing *v1.NetworkPort) {
	add := func(sp corev1.ServicePort) {
		target := sp.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 || target.Type == intstr.String && target.StrVal == "" {
			target = intstr.FromInt32(sp.Port)
		}
		protocol := sp.Protocol
		if protocol == "" {
			protocol = corev1.ProtocolTCP
		}
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: &target})
	}
	if len(rulePorts) == 0 {
		for _, sp := range svc.Spec.Ports {
			add(sp)
		}
		return out, nil
	}
	for _, rp := range rulePorts {
		end := rp.Port
		if rp.EndPort != nil {
			end = *rp.EndPort
		}
		found := false
		for _, sp := range svc.Spec.Ports {
			if rp.Port <= sp.Port && sp.Port <= end && (rp.Protocol == "" || corev1.Protocol(rp.Protocol) == sp.Protocol) {
				add(sp)
				found = true
			}
		}
		if !found {
			return nil, &rp
		}
	}
	return out, nil
}

func servicePorts(svc *corev1.Service) string {
	var ports []string
	for _, sp := range svc.Spec.Ports {
		ports = append(ports, strconv.Itoa(int(sp.Port)))
	}
	if len(ports) == 0 {
		return "none"
	}
	return strings.Join(ports, ", ")
}

// servicePeer selects the pods behind svc, in its namespace only.
func servicePeer(svc *corev1.Service) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: svc.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: svc.Spec.Selector},
	}
}

// egressPolicyRules are the NetworkPolicy egress rules of e: to the
// gateway's pods on its ports, and to each service rule's pods on the
// ports it names.
func (e Egress) egressPolicyRules(n v1.Network) []networkingv1.NetworkPolicyEgressRule {
	var out []networkingv1.NetworkPolicyEgressRule
	if e.Gateway != nil {
		ports, _ := targetPorts(e.Gateway, nil)
		out = append(out, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{servicePeer(e.Gateway)}, Ports: ports})
	}
	for _, rule := range n.Egress {
		if rule.Service == nil {
			continue
		}
		svc := e.Services[*rule.Service]
		if svc == nil {
			continue // ResolveEgress refuses to build without it
		}
		ports, _ := targetPorts(svc, rule.Ports)
		out = append(out, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{servicePeer(svc)}, Ports: ports})
	}
	return out
}

// Proxy variables every common HTTP client reads (curl, pip, npm, git,
// Python's requests and httpx, Go); Node's own fetch reads them when
// NODE_USE_ENV_PROXY is set.
var proxyVariables = []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"}

// EndpointVariable is the variable a sandbox finds an endpoint's address
// in: AGENTSANDBOX_ENDPOINT_ and the name in upper case, dashes as
// underscores.
func EndpointVariable(name string) string {
	return "AGENTSANDBOX_ENDPOINT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// gatewayURL is the address sandboxes reach the gateway at: its cluster IP
// (no DNS needed, so it works without clusterDNS) and first port.
func (e Egress) gatewayURL() string {
	return "http://" + net.JoinHostPort(e.Gateway.Spec.ClusterIP, strconv.Itoa(int(e.Gateway.Spec.Ports[0].Port)))
}

// A Move is an address a sandbox pod's processes were given when the pod
// was made that the cluster no longer answers at: the egress gateway's (in
// their proxy variables) or a service rule's Service's (in /etc/hosts).
// Neither can change in a running pod, so a member given one is replaced
// and a running sandbox is told to start again.
type Move struct {
	// Service is the service rule's Service that moved; nil for the
	// egress gateway.
	Service *v1.ServiceReference
	// Given is the address the pod's processes were given; Current the
	// one that answers now, "" for a Service recreated without a cluster
	// IP (headless).
	Given, Current string
}

// Moved lists the addresses pod's processes were given that the gateway
// and the Services of e no longer have (each was recreated). The
// gateway's is read from v1.AnnotationEgressGateway; a Service's from the
// pod's /etc/hosts entry for its names, which only a sandbox without
// cluster DNS has (the resolver follows a recreated Service). A pod made
// before either was recorded, or one that does not use them, has none.
func (e Egress) Moved(pod *corev1.Pod) []Move {
	if pod == nil {
		return nil
	}
	var moves []Move
	if e.Gateway != nil {
		given, recorded := pod.Annotations[v1.AnnotationEgressGateway]
		if current := e.gatewayURL(); recorded && given != current {
			moves = append(moves, Move{Given: given, Current: current})
		}
	}
	for _, alias := range pod.Spec.HostAliases {
		for ref := range e.Services {
			if len(alias.Hostnames) == 0 || alias.Hostnames[0] != serviceNames(ref)[0] {
				continue
			}
			if current := e.clusterIP(ref); alias.IP != current {
				moves = append(moves, Move{Service: &ref, Given: alias.IP, Current: current})
			}
		}
	}
	return moves
}

// podEnv is what the sandbox's processes need to go through the gateway:
// the proxy variables, what bypasses it (the gateway itself, loopback, the
// cidr rules and the Services, which the policy allows directly) and each
// endpoint's address. Variables the template sets itself are left to it.
func (e Egress) podEnv(n v1.Network, template []v1.EnvVar) []corev1.EnvVar {
	if e.Gateway == nil {
		return nil
	}
	url := e.gatewayURL()
	noProxy := []string{"localhost", "127.0.0.1", "::1", e.Gateway.Spec.ClusterIP}
	for _, rule := range n.Egress {
		switch {
		case rule.CIDR != "":
			noProxy = append(noProxy, rule.CIDR)
		case rule.Service != nil:
			noProxy = append(noProxy, serviceNames(*rule.Service)...)
			if ip := e.clusterIP(*rule.Service); ip != "" {
				noProxy = append(noProxy, ip)
			}
		}
	}
	var out []corev1.EnvVar
	for _, name := range proxyVariables {
		out = append(out, corev1.EnvVar{Name: name, Value: url})
	}
	bypass := strings.Join(noProxy, ",")
	out = append(out, corev1.EnvVar{Name: "NO_PROXY", Value: bypass}, corev1.EnvVar{Name: "no_proxy", Value: bypass},
		corev1.EnvVar{Name: "NODE_USE_ENV_PROXY", Value: "1"})
	for _, ep := range n.Endpoints {
		out = append(out, corev1.EnvVar{Name: EndpointVariable(ep.Name), Value: url + "/endpoints/" + ep.Name})
	}
	return slices.DeleteFunc(out, func(v corev1.EnvVar) bool {
		return slices.ContainsFunc(template, func(t v1.EnvVar) bool { return t.Name == v.Name })
	})
}

// serviceNames are the names cluster DNS gives a Service.
func serviceNames(ref v1.ServiceReference) []string {
	short := ref.Name + "." + ref.Namespace
	return []string{short, short + ".svc", short + ".svc.cluster.local"}
}

// clusterIP is the cluster IP of a service rule's Service; "" when it has
// none (a headless Service) or was not resolved.
func (e Egress) clusterIP(ref v1.ServiceReference) string {
	svc := e.Services[ref]
	if svc == nil || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return ""
	}
	return svc.Spec.ClusterIP
}

// serviceHosts are the /etc/hosts entries of a sandbox that may not ask
// the cluster resolver: each service rule's Service under its DNS names at
// its cluster IP, so that code reaches it by name all the same. With
// cluster DNS allowed there are none, so the resolver's answer, which
// follows a recreated Service, is the one used.
func (e Egress) serviceHosts(n v1.Network) []corev1.HostAlias {
	if n.AllowsClusterDNS() {
		return nil
	}
	var out []corev1.HostAlias
	for _, rule := range n.Egress {
		if rule.Service == nil {
			continue
		}
		if ip := e.clusterIP(*rule.Service); ip != "" {
			out = append(out, corev1.HostAlias{IP: ip, Hostnames: serviceNames(*rule.Service)})
		}
	}
	return out
}
