package environment

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// GateName is the init container that holds a sandbox's own processes
// back until its egress policy is enforced (cmd/sandbox-gate).
const GateName = "egress-gate"

// gatePort is the port the gate proves enforcement on: the kubelet's, on
// the node's address, which always listens and which the node's exception
// from every broad egress rule denies.
const gatePort = 10250

// gateUser runs the gate: distroless's nonroot.
const gateUser = 65532

// GateTimeout is how long the gate waits for enforcement before it fails
// the pod's start (reason PolicyNotEnforced).
const GateTimeout = "30s"

// WithEgressGate has the environment's pod start with the gate from image
// (unless image is empty): it installs the sandbox agent, and then holds
// the sandbox's own processes back until its policy is enforced, unless
// the template's egress may allow the kubelet's port, where a denied
// connection cannot be told from an allowed one.
func (b Blueprint) WithEgressGate(image string) Blueprint {
	b.gateImage = image
	b.gateProves = GateProves(b.template.Spec.Network)
	return b
}

// GateProves tells whether the gate can prove a sandbox's policy enforced:
// whether no egress rule may allow the kubelet's port.
func GateProves(n v1.Network) bool { return !mayReach(n.Egress, gatePort) }

// mayReach tells whether a cidr rule allows TCP port, on any address: a
// rule of all ports, or one whose ports include it. Hosts rules go through
// the egress gateway and service rules to pods, never to a node's port.
func mayReach(rules []v1.EgressRule, port int32) bool {
	for _, r := range rules {
		if r.CIDR == "" {
			continue
		}
		if len(r.Ports) == 0 {
			return true
		}
		for _, p := range r.Ports {
			end := p.Port
			if p.EndPort != nil {
				end = *p.EndPort
			}
			if (p.Protocol == "" || p.Protocol == v1.Protocol(corev1.ProtocolTCP)) && p.Port <= port && port <= end {
				return true
			}
		}
	}
	return false
}

// gateContainer is the gate, confined as the sandbox's own container is,
// with its resources (so it changes nothing the quota counts).
func (b Blueprint) gateContainer(sandbox corev1.Container) corev1.Container {
	security := sandbox.SecurityContext.DeepCopy()
	security.ReadOnlyRootFilesystem = ptr.To(true)
	// The gate's image has no user of its own to run as.
	security.RunAsUser, security.RunAsGroup = ptr.To[int64](gateUser), ptr.To[int64](gateUser)
	gate := corev1.Container{
		Name:                     GateName,
		Image:                    b.gateImage,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  []string{"/sandbox-gate"},
		Args:                     []string{"--install-agent=" + v1.AgentDir},
		VolumeMounts:             []corev1.VolumeMount{{Name: v1.AgentVolumeName, MountPath: v1.AgentDir}},
		Resources:                sandbox.Resources,
		SecurityContext:          security,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if b.gateProves {
		gate.Args = append(gate.Args, "--host=$(HOST_IP)", "--port="+strconv.Itoa(gatePort), "--timeout="+GateTimeout)
		gate.Env = []corev1.EnvVar{{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"},
		}}}
	}
	return gate
}

// agentVolume holds the sandbox agent the gate installs: small, on the
// node's disk, remade at each start.
func agentVolume() corev1.Volume {
	return corev1.Volume{Name: v1.AgentVolumeName, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))},
	}}
}
