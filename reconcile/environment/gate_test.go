package environment

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// TestEgressGateRunsFirstUnlessTheKubeletMayBeAllowed: the pod starts with
// the gate, confined like the sandbox, which installs the sandbox agent and
// points at the node's kubelet, except where the template's egress may
// allow that port (the gate could not tell a denial); no gate image, no
// gate and no agent.
func TestEgressGateRunsFirstUnlessTheKubeletMayBeAllowed(t *testing.T) {
	rule := func(cidr string, ports ...v1.NetworkPort) v1.EgressRule {
		return v1.EgressRule{CIDR: cidr, Ports: ports}
	}
	cases := []struct {
		name   string
		egress []v1.EgressRule
		image  string
		gated  bool
	}{
		{"default deny", nil, "gate:1", true},
		{"web egress", []v1.EgressRule{rule("0.0.0.0/0", v1.NetworkPort{Port: 443})}, "gate:1", true},
		{"UDP on the kubelet's port", []v1.EgressRule{rule("0.0.0.0/0", v1.NetworkPort{Port: 10250, Protocol: v1.Protocol(corev1.ProtocolUDP)})}, "gate:1", true},
		{"all ports", []v1.EgressRule{rule("140.82.112.0/20")}, "gate:1", false},
		{"the kubelet's port", []v1.EgressRule{rule("10.244.0.1/32", v1.NetworkPort{Port: 10250})}, "gate:1", false},
		{"a range over it", []v1.EgressRule{rule("0.0.0.0/0", v1.NetworkPort{Port: 10000, EndPort: ptr.To[int32](11000)})}, "gate:1", false},
		{"no image", nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Image: "python:3.12", Network: v1.Network{Egress: tc.egress}}}
			pod := Blueprint{template: tpl, namespace: "sandbox-x"}.WithEgressGate(tc.image).Pod()
			if tc.image == "" {
				if len(pod.Spec.InitContainers) != 0 || len(pod.Spec.Volumes) != 1 {
					t.Fatalf("no gate image, yet init containers %v, volumes %v", pod.Spec.InitContainers, pod.Spec.Volumes)
				}
				return
			}
			gate, sandbox := pod.Spec.InitContainers[0], pod.Spec.Containers[0]
			if !slices.Contains(gate.Args, "--install-agent="+v1.AgentDir) ||
				!slices.ContainsFunc(sandbox.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == v1.AgentVolumeName && m.MountPath == v1.AgentDir && m.ReadOnly
				}) {
				t.Errorf("the agent is not installed into the sandbox, read-only: gate args %v, sandbox mounts %v", gate.Args, sandbox.VolumeMounts)
			}
			if gated := slices.Contains(gate.Args, "--host=$(HOST_IP)"); gated != tc.gated {
				t.Fatalf("gate args %v, want it to prove enforcement: %v", gate.Args, tc.gated)
			}
			if !tc.gated {
				return
			}
			if gate.Name != GateName || gate.Image != tc.image || !slices.Contains(gate.Args, "--host=$(HOST_IP)") ||
				gate.Env[0].ValueFrom.FieldRef.FieldPath != "status.hostIP" {
				t.Errorf("gate %+v does not point at the node's kubelet", gate)
			}
			sc := gate.SecurityContext
			if !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" || !*sc.ReadOnlyRootFilesystem || *sc.RunAsUser == 0 {
				t.Errorf("gate security context %+v is not the sandbox's confinement", sc)
			}
			if !equalResources(gate.Resources, sandbox.Resources) {
				t.Errorf("gate resources %v, want the sandbox's %v (the quota counts the larger)", gate.Resources, sandbox.Resources)
			}
		})
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	return a.Requests.Cpu().Equal(*b.Requests.Cpu()) && a.Limits.Memory().Equal(*b.Limits.Memory())
}
