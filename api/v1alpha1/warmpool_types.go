package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FinalizerWarmPool keeps a deleted WarmPool until its unclaimed members
// are gone and every member a Sandbox claimed is relabelled as that
// Sandbox's: members carry no owner reference to their pool
// (LabelWarmPoolUID says why), so its controller deletes them itself.
const FinalizerWarmPool = "agentsandbox.dev/warm-pool-members"

// WarmPoolSpec keeps a number of sandboxes of one template started and Ready,
// so that a claim is served without waiting for a pod to start.
type WarmPoolSpec struct {
	// TemplateRef is the SandboxTemplate the members are stamped from.
	// +required
	TemplateRef LocalObjectReference `json:"templateRef"`

	// Replicas is the number of Ready members to keep. It is the /scale
	// subresource's replica count, so an HPA can drive it. A claimed member
	// is replaced at once, unless it was claimed in a burst (three claims
	// within a second): those are replaced once claims pause for a second,
	// and until then the pool builds only what keeps a quarter of replicas.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// UpdateStrategy says how members are replaced when the template changes.
	// +kubebuilder:default={type: OnReplenish}
	// +optional
	UpdateStrategy WarmPoolUpdateStrategy `json:"updateStrategy,omitzero"`

	// WhenEmpty says what a claim does when no member is Ready.
	// +kubebuilder:default=ColdStart
	// +optional
	WhenEmpty WhenEmptyPolicy `json:"whenEmpty,omitempty"`
}

// WarmPoolUpdateStrategyType names a rollout strategy.
// +kubebuilder:validation:Enum=Recreate;OnReplenish
type WarmPoolUpdateStrategyType string

const (
	// RecreateUpdateStrategy replaces stale members as soon as the template
	// changes.
	RecreateUpdateStrategy WarmPoolUpdateStrategyType = "Recreate"
	// OnReplenishUpdateStrategy keeps stale members until they are claimed and
	// builds replacements from the new template.
	OnReplenishUpdateStrategy WarmPoolUpdateStrategyType = "OnReplenish"
)

// WarmPoolUpdateStrategy is how a pool rolls its members.
type WarmPoolUpdateStrategy struct {
	// Type of the strategy.
	// +kubebuilder:default=OnReplenish
	// +optional
	Type WarmPoolUpdateStrategyType `json:"type,omitempty"`
}

// WhenEmptyPolicy is what a claim against an empty pool does.
// +kubebuilder:validation:Enum=ColdStart;Wait
type WhenEmptyPolicy string

const (
	// WhenEmptyColdStart starts the sandbox from the pool's template.
	WhenEmptyColdStart WhenEmptyPolicy = "ColdStart"
	// WhenEmptyWait keeps the claim pending until a member is Ready.
	WhenEmptyWait WhenEmptyPolicy = "Wait"
)

// WarmPoolStatus is the observed state of a WarmPool.
type WarmPoolStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is the number of members, Ready or not.
	// +optional
	Replicas int32 `json:"replicas"`
	// ReadyReplicas is the number of members ready to be claimed.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// Selector is the label selector of the unclaimed members' namespaces,
	// for the /scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// TemplateHash is the template content hash current members are built
	// from.
	// +optional
	TemplateHash string `json:"templateHash,omitempty"`
	// Conditions: Ready (readyReplicas == replicas), Reconciling, Stalled.
	// Ready's reason says why a pool is short: Filling, TemplateNotReady,
	// MembersUnschedulable (the scheduler cannot place some members' pods;
	// they are held, and its message says why) or BuildFailed (the API
	// server refused a member's object; its answer is in the message).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WarmPool keeps pre-started sandboxes of one template ready to be claimed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Cluster,shortName=sbxwp,categories=agentsandbox
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.metadata.name.size() <= 63",message="metadata.name must be a DNS label of at most 63 characters: it appears in labels of every member"
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.templateRef.name`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.updateStrategy.type`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WarmPoolSpec `json:"spec"`
	// +optional
	Status WarmPoolStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (fluxcd/pkg/runtime Getter).
func (in *WarmPool) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions (fluxcd/pkg/runtime Setter).
func (in *WarmPool) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// WarmPoolList is a list of WarmPools.
//
// +kubebuilder:object:root=true
type WarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WarmPool `json:"items"`
}

func init() {
	register(&WarmPool{}, &WarmPoolList{})
}
