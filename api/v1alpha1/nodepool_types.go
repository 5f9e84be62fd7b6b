package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FinalizerNodePool keeps a deleted NodePool until its label and taints are
// off every node: a taint left behind would keep ordinary workloads off a
// node forever.
const FinalizerNodePool = "agentsandbox.dev/node-pool"

// NodePoolSpec declares that untrusted code runs under a given container
// runtime handler (gVisor's runsc, Kata, ...) on the nodes the selector
// matches. It becomes a RuntimeClass of the same name.
type NodePoolSpec struct {
	// RuntimeHandler is the CRI handler the nodes are configured with, for
	// example runsc (gVisor) or kata-qemu. A RuntimeClass handler cannot
	// change, so neither can this.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="runtimeHandler is immutable"
	// +required
	RuntimeHandler string `json:"runtimeHandler"`

	// NodeSelector selects the nodes that belong to the pool; sandbox pods
	// of templates that use the pool are scheduled onto them only.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	// +required
	NodeSelector map[string]string `json:"nodeSelector"`

	// Taints kept on the pool's nodes so that nothing but sandboxes runs
	// there; sandbox pods get the matching tolerations.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +optional
	Taints []NodePoolTaint `json:"taints,omitempty"`

	// Overhead is the fixed per-pod cost of the runtime (the gVisor sentry or
	// the Kata VM), added to every sandbox pod's resource accounting.
	// +optional
	Overhead corev1.ResourceList `json:"overhead,omitempty"`
}

// TaintEffect is the effect of a node pool taint.
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

// NodePoolTaint is a taint the pool keeps on its nodes.
type NodePoolTaint struct {
	// Key of the taint.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +required
	Key string `json:"key"`
	// Value of the taint.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Value string `json:"value,omitempty"`
	// Effect of the taint.
	// +kubebuilder:default=NoSchedule
	// +optional
	Effect TaintEffect `json:"effect,omitempty"`
}

// NodePoolStatus is the observed state of a NodePool.
type NodePoolStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// RuntimeClassName is the RuntimeClass created for the pool.
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	// Nodes is the number of nodes the selector matches.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// ReadyNodes is the number of matching nodes that are Ready.
	// +optional
	ReadyNodes int32 `json:"readyNodes,omitempty"`
	// Conditions: Ready, Reconciling, Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePool is a set of nodes running a stronger container runtime (gVisor,
// Kata) that sandbox templates can ask for.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sbxnp,categories=agentsandbox
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.metadata.name.size() <= 63",message="metadata.name must be a DNS label of at most 63 characters: it names the RuntimeClass and appears in node labels"
// +kubebuilder:printcolumn:name="Handler",type=string,JSONPath=`.spec.runtimeHandler`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Ready Nodes",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodePoolSpec `json:"spec"`
	// +optional
	Status NodePoolStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (fluxcd/pkg/runtime Getter).
func (in *NodePool) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions (fluxcd/pkg/runtime Setter).
func (in *NodePool) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

func init() {
	register(&NodePool{}, &NodePoolList{})
}
