package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FinalizerSandbox holds a deleted Sandbox until its pod is gone from its
// node. The pod goes first, while its namespace still takes the kubelet's
// events, so a node that cannot finish the deletion says why in the
// Sandbox's status instead of silently keeping the pod's requests. Admission
// adds it when a Sandbox is created; the rest of the namespace goes by
// garbage collection once the Sandbox is gone.
const FinalizerSandbox = "agentsandbox.dev/sandbox-pod"

// SandboxSpec asks for one isolated environment, owned by one developer or
// agent, claimed from a warm pool or started from a template.
// +kubebuilder:validation:XValidation:rule="has(self.templateRef) != has(self.warmPoolRef)",message="set exactly one of templateRef and warmPoolRef"
// +kubebuilder:validation:XValidation:rule="has(self.templateRef) == has(oldSelf.templateRef) && has(self.warmPoolRef) == has(oldSelf.warmPoolRef)",message="templateRef and warmPoolRef cannot be added or removed after creation"
// +kubebuilder:validation:XValidation:rule="!(has(self.shutdownTime) && has(self.ttl))",message="set at most one of shutdownTime and ttl"
type SandboxSpec struct {
	// TemplateRef starts the sandbox on demand from a SandboxTemplate.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="templateRef is immutable"
	// +optional
	TemplateRef *LocalObjectReference `json:"templateRef,omitempty"`

	// WarmPoolRef claims a Ready member of a WarmPool (or cold-starts from the
	// pool's template when none is Ready).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="warmPoolRef is immutable"
	// +optional
	WarmPoolRef *LocalObjectReference `json:"warmPoolRef,omitempty"`

	// Owner is the Kubernetes identity (user or service account) the sandbox
	// belongs to; only the owner may exec into it, forward its ports and read
	// its logs. Left out, admission sets it to the creator's identity; any
	// other value is refused unless the creator is a sandbox admin.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="owner is immutable"
	// +required
	Owner string `json:"owner,omitempty"`

	// State is the desired state: Running, or Stopped (pod deleted,
	// namespace and workspace kept).
	// +kubebuilder:default=Running
	// +optional
	State SandboxState `json:"state,omitempty"`

	// ShutdownTime is the absolute time the sandbox's lifetime ends.
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// TTL is the lifetime measured from creation, e.g. 2h. Without
	// shutdownTime or ttl the template's lifecycle applies.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// ShutdownPolicy is what happens when the lifetime ends; the template's
	// policy (or Stop) when unset.
	// +optional
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`

	// IdleTimeout shortens the template's lifecycle.idleTimeout for this
	// sandbox, e.g. 5m; a longer value than the template's is held to the
	// template's (status.idle.timeout is the one that applies). Without an
	// idleTimeout on the template it sets one.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// Env adds or overrides environment variables, as far as the template's
	// envVarsInjectionPolicy allows. It forces a cold start.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="env is immutable"
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`
}

// SandboxState is the desired state of a sandbox.
// +kubebuilder:validation:Enum=Running;Stopped
type SandboxState string

const (
	// SandboxRunning keeps the sandbox pod running.
	SandboxRunning SandboxState = "Running"
	// SandboxStopped deletes the pod and keeps namespace and workspace.
	SandboxStopped SandboxState = "Stopped"
)

// SandboxPhase is a one-word summary of a sandbox's observed state.
// +kubebuilder:validation:Enum=Pending;Starting;Running;Stopping;Stopped;Failed;Deleting
type SandboxPhase string

// The phases of a sandbox.
const (
	SandboxPhasePending  SandboxPhase = "Pending"
	SandboxPhaseStarting SandboxPhase = "Starting"
	SandboxPhaseRunning  SandboxPhase = "Running"
	SandboxPhaseStopping SandboxPhase = "Stopping"
	SandboxPhaseStopped  SandboxPhase = "Stopped"
	SandboxPhaseFailed   SandboxPhase = "Failed"
	// SandboxPhaseDeleting: the Sandbox is deleted and its pod is being
	// torn down on its node.
	SandboxPhaseDeleting SandboxPhase = "Deleting"
)

// SandboxPhases are the phases in the order a sandbox goes through them,
// as the CRD's enum lists them (TestSandboxPhasesAreTheCRDs).
var SandboxPhases = []SandboxPhase{
	SandboxPhasePending, SandboxPhaseStarting, SandboxPhaseRunning, SandboxPhaseStopping,
	SandboxPhaseStopped, SandboxPhaseFailed, SandboxPhaseDeleting,
}

// LaunchType says how a sandbox was started.
// +kubebuilder:validation:Enum=Warm;Cold
type LaunchType string

const (
	// LaunchWarm means the sandbox was a Ready warm-pool member when claimed.
	LaunchWarm LaunchType = "Warm"
	// LaunchCold means the sandbox was built from its template on demand.
	LaunchCold LaunchType = "Cold"
)

// SandboxStatus is the observed state of a Sandbox.
type SandboxStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the state.
	// +optional
	Phase SandboxPhase `json:"phase,omitempty"`
	// Namespace the sandbox runs in: sandbox-<name> for a cold start; for a
	// sandbox claimed from a warm pool, the namespace of the member it took
	// over, sandbox-wp-<pool>-<id>. Address the sandbox's objects by this
	// field, never by its name.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// PodName of the sandbox pod while it runs.
	// +optional
	PodName string `json:"podName,omitempty"`
	// PodIP of the sandbox pod while it runs.
	// +optional
	PodIP string `json:"podIP,omitempty"`
	// LaunchType says whether the sandbox came warm from a pool or cold from
	// its template.
	// +optional
	LaunchType LaunchType `json:"launchType,omitempty"`
	// LaunchMessage says why a sandbox with a warmPoolRef was cold-started.
	// +optional
	LaunchMessage string `json:"launchMessage,omitempty"`
	// RequestedAt is when the sandbox was requested (its creation).
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
	// ClaimedAt is when a warm member was bound to the sandbox.
	// +optional
	ClaimedAt *metav1.Time `json:"claimedAt,omitempty"`
	// ReadyAt is when the sandbox last became Ready.
	// +optional
	ReadyAt *metav1.Time `json:"readyAt,omitempty"`
	// ShutdownAt is when the sandbox's lifetime ends, if it has one.
	// +optional
	ShutdownAt *metav1.Time `json:"shutdownAt,omitempty"`
	// LastActivityAt is the last use of the sandbox the reconciler knows
	// of: the latest of the clients' coarse activity record (annotation
	// agentsandbox.dev/last-activity), the claim, and the last time it
	// became Ready. It is updated at most as often as clients report, not
	// for every command.
	// +optional
	LastActivityAt *metav1.Time `json:"lastActivityAt,omitempty"`
	// Idle is the idle stop that applies, when the sandbox's lifecycle has
	// an idleTimeout.
	// +optional
	Idle *IdleStatus `json:"idle,omitempty"`
	// StoppedAt is when the sandbox last stopped (for any reason); cleared
	// when it runs again.
	// +optional
	StoppedAt *metav1.Time `json:"stoppedAt,omitempty"`
	// DeleteAt is when a stopped sandbox will be deleted
	// (lifecycle.deleteAfterStopped after stoppedAt).
	// +optional
	DeleteAt *metav1.Time `json:"deleteAt,omitempty"`
	// Conditions: Ready (pod Running, Ready and with an IP), Reconciling,
	// Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IdleStatus is the idle stop that applies to a sandbox.
type IdleStatus struct {
	// Timeout is the idle timeout in force: the template's, or the
	// sandbox's shorter one.
	Timeout metav1.Duration `json:"timeout"`
	// StopAt is when the sandbox stops if nobody uses it before; unset
	// while it is not Running.
	// +optional
	StopAt *metav1.Time `json:"stopAt,omitempty"`
	// WakeOnConnect says whether clients may start the sandbox again
	// when it stopped for idleness (the template's
	// lifecycle.wakeOnConnect).
	WakeOnConnect bool `json:"wakeOnConnect"`
}

// IdleStopped reports whether the sandbox is stopping or stopped because
// nobody used it for its idle timeout (not by its owner, not at the end
// of its lifetime): the stop a client may undo by using it
// (AnnotationLastActivity), when status.idle.wakeOnConnect.
func (in *Sandbox) IdleStopped() bool {
	ready := meta.FindStatusCondition(in.Status.Conditions, ReadyCondition)
	return ready != nil && ready.Reason == ReasonIdleTimeout
}

// MaxSandboxNameLength is the longest name a Sandbox may have: its
// namespace is named sandbox-<name>, and a namespace name has at most 63
// characters. The CRD's rule on metadata.name below says the same number
// (TestMaxSandboxNameLengthIsTheCRDs).
const MaxSandboxNameLength = 63 - len("sandbox-")

// Sandbox is one isolated environment in a namespace of its own, owned by
// one developer or agent.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sbx,categories=agentsandbox
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.metadata.name.size() <= 55",message="metadata.name must be a DNS label of at most 55 characters: the sandbox's namespace is named sandbox-<name>, and a namespace name has at most 63 characters"
// +kubebuilder:selectablefield:JSONPath=`.spec.owner`
// +kubebuilder:selectablefield:JSONPath=`.spec.templateRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.warmPoolRef.name`
// +kubebuilder:selectablefield:JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Launch",type=string,JSONPath=`.status.launchType`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.status.namespace`
// +kubebuilder:printcolumn:name="Pod IP",type=string,JSONPath=`.status.podIP`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxSpec `json:"spec"`
	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (fluxcd/pkg/runtime Getter).
func (in *Sandbox) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions (fluxcd/pkg/runtime Setter).
func (in *Sandbox) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// SandboxList is a list of Sandboxes.
//
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}

func init() {
	register(&Sandbox{}, &SandboxList{})
}
