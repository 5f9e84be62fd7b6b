package v1alpha1

import "time"

// The reasons of the kinds' conditions (Ready, Reconciling, Stalled), in
// one place: clients read them (v1alpha1.MissingReference, the provider's
// waits, the GitOps health check), so they are part of the API. Each
// constant is named Reason and its value.

// Reasons more than one kind uses (GitSync, NodePool, Sandbox, WarmPool).
const (
	// ReasonProgressing: Reconciling, for a node pool or a GitSync.
	ReasonProgressing = "Progressing"
	// ReasonTemplateNotFound: spec.templateRef names no template (see
	// v1alpha1.MissingReference).
	ReasonTemplateNotFound = "TemplateNotFound"
	ReasonTemplateNotReady = "TemplateNotReady"
	// ReasonBuildFailed: the API server refused a member's object (an
	// admission policy, a quota); the message has its answer.
	ReasonBuildFailed = "BuildFailed"
	// ReasonInvalidEgress: the template's egress cannot be enforced as
	// written (a SandboxTemplate), or not in this cluster (a Sandbox or
	// WarmPool: no egress gateway, a Service that selects no pods).
	ReasonInvalidEgress = "InvalidEgress"
	// ReasonServiceNotFound: a service rule of the template, or the
	// reconciler's --egress-gateway, names no Service (see
	// v1alpha1.MissingReference).
	ReasonServiceNotFound = "ServiceNotFound"
)

// Reasons of a NodePool. Succeeded, Progressing, ProgressingWithRetry and
// ReconciliationFailed are Flux's, so tools that read Flux objects read
// these the same way.
const (
	ReasonSucceeded            = "Succeeded"
	ReasonProgressingWithRetry = "ProgressingWithRetry"
	ReasonReconciliationFailed = "ReconciliationFailed"
	// ReasonRuntimeClassConflict: a RuntimeClass of the pool's name exists
	// and belongs to someone else.
	ReasonRuntimeClassConflict = "RuntimeClassConflict"
	// ReasonNodeConflict: a node the pool selects is held by another pool.
	ReasonNodeConflict = "NodeConflict"
	// ReasonNoReadyNodes: the selector matches no Ready node, so nothing
	// that uses the pool can be scheduled.
	ReasonNoReadyNodes = "NoReadyNodes"
)

// Reasons of a SandboxTemplate.
const (
	ReasonValid             = "Valid"
	ReasonInvalidImage      = "InvalidImage"
	ReasonDuplicatePortName = "DuplicatePortName"
	ReasonNodePoolNotFound  = "NodePoolNotFound"
	// ReasonNodePoolNotReady: the node pool exists but has no RuntimeClass
	// yet, so the API server would refuse the template's pods.
	ReasonNodePoolNotReady = "NodePoolNotReady"
)

// Reasons of a WarmPool.
const (
	ReasonPoolFull = "PoolFull"
	ReasonFilling  = "Filling"
	// ReasonMembersDeleted (an event): a pass deleted members.
	ReasonMembersDeleted = "MembersDeleted"
	// ReasonMembersUnschedulable: some members' pods cannot be placed on a node.
	// They are kept, not rebuilt: a new pod would not fit either, and they
	// start as soon as a node they fit joins.
	ReasonMembersUnschedulable = "MembersUnschedulable"
	// ReasonMembersNotStarting: some members' pods were placed on a node
	// that has not started them for NotTransient (a runtime handler it
	// lacks, a volume it cannot mount); the message is the kubelet's.
	ReasonMembersNotStarting = "MembersNotStarting"
)

// Reasons of a Sandbox.
const (
	// ReasonNamespaceConflict: the namespace exists and belongs to
	// something else. Nothing in it is touched.
	ReasonNamespaceConflict = "NamespaceConflict"
	// ReasonNamespaceTerminating: the namespace of an earlier sandbox of
	// the same name is still being deleted; the new one starts in a new
	// namespace once it is gone.
	ReasonNamespaceTerminating = "NamespaceTerminating"
	ReasonPodReady             = "PodReady"
	ReasonPodStarting          = "PodStarting"
	ReasonStopped              = "Stopped"
	ReasonStopping             = "Stopping"
	ReasonExpired              = "Expired"
	// ReasonIdleTimeout: nobody used the sandbox for its idle timeout, so
	// it was stopped (workspace kept). Using it through a client wakes it
	// when status.idle.wakeOnConnect.
	ReasonIdleTimeout = "IdleTimeout"
	// ReasonWoken (an event): a client used a sandbox stopped for
	// idleness, which starts it again.
	ReasonWoken = "Woken"
	// ReasonDeletedAfterStopped (an event): the sandbox stayed stopped for
	// its template's lifecycle.deleteAfterStopped and was deleted.
	ReasonDeletedAfterStopped      = "DeletedAfterStopped"
	ReasonWarmPoolNotFound         = "WarmPoolNotFound"
	ReasonEnvVarsInjectionRejected = "EnvVarsInjectionRejected"
	ReasonPodFailed                = "PodFailed"
	// ReasonContainerFailing: the pod is scheduled but its container cannot
	// run: it crashes, was killed for exceeding its memory limit, or its
	// image or configuration is refused. The kubelet keeps retrying.
	ReasonContainerFailing = "ContainerFailing"
	ReasonWaitingForMember = "WaitingForMember"
	// ReasonPlacementFailed: the reconciler could not decide the sandbox's
	// namespace (listing or claiming warm members failed); it retries.
	ReasonPlacementFailed = "PlacementFailed"
	// ReasonUnschedulable: the scheduler has not found a node for the
	// sandbox's pod for NotTransient (no node has the room, none matches,
	// a volume cannot be bound); the message is the scheduler's. The pod
	// stays, and starts when room appears, but a client waiting for the
	// sandbox stops waiting.
	ReasonUnschedulable = "Unschedulable"
	// ReasonPodNotStarting: the pod has been on its node for NotTransient
	// and the kubelet keeps failing to start it (a runtime handler the
	// node lacks, a volume it cannot mount); the message is the kubelet's.
	ReasonPodNotStarting = "PodNotStarting"
	// ReasonEgressGatewayMoved (a Warning event): the egress gateway's
	// Service answers at another address than the sandbox's processes were
	// given when its pod started, so their egress by name fails until the
	// sandbox is stopped and started again (its workspace kept).
	ReasonEgressGatewayMoved = "EgressGatewayMoved"
	// ReasonEgressServiceMoved (a Warning event): a service rule's Service
	// answers at another cluster IP than the sandbox's /etc/hosts gives
	// its names (written when its pod was made, for a sandbox without
	// cluster DNS), so reaching it by name fails until the sandbox is
	// stopped and started again (its workspace kept).
	ReasonEgressServiceMoved = "EgressServiceMoved"
	// ReasonPolicyNotEnforced: the pod's egress gate (the init container
	// that runs before the sandbox's own processes) found what the
	// NetworkPolicy denies still reachable after its timeout: the cluster
	// does not enforce the policy for the pod, and the sandbox's code is
	// never started. The message is the gate's; the kubelet retries it.
	ReasonPolicyNotEnforced = "PolicyNotEnforced"
	// ReasonAgentNotInstalled: the pod's init container could not copy the
	// sandbox agent (package session) into the pod, so the sandbox's code
	// is not started: its gate image lacks the agent, or the volume is
	// full. The message is the init container's; the kubelet retries it.
	ReasonAgentNotInstalled = "AgentNotInstalled"
	// ReasonDeleting: the Sandbox is deleted and its pod is going.
	ReasonDeleting = "Deleting"
	// ReasonTerminationStuck: the sandbox's pod has been terminating for
	// longer than a node takes (stopped or deleted), holding its requests;
	// the message is the kubelet's last word on it.
	ReasonTerminationStuck = "TerminationStuck"
)

// NotTransient is how long a sandbox's pod may stay unschedulable, or its
// node keep failing to start it, before the sandbox reports it as a
// problem that will not pass on its own (ReasonUnschedulable,
// ReasonPodNotStarting) and clients waiting for it give up.
const NotTransient = 30 * time.Second

// TerminationStuckAfter is how long a sandbox's pod may take to terminate
// before the sandbox reports ReasonTerminationStuck.
const TerminationStuckAfter = 2 * time.Minute

// Reasons of a GitSync.
const (
	ReasonReconciliationSucceeded = "ReconciliationSucceeded"
	ReasonAuthenticationFailed    = "AuthenticationFailed"
	// ReasonServiceAccountNotFound: spec.serviceAccountName names no
	// ServiceAccount in the reconciler's namespace.
	ReasonServiceAccountNotFound = "ServiceAccountNotFound"
	ReasonFetchFailed            = "FetchFailed"
	ReasonValidationFailed       = "ValidationFailed"
	ReasonApplyFailed            = "ApplyFailed"
	ReasonPruneFailed            = "PruneFailed"
	ReasonHealthCheckFailed      = "HealthCheckFailed"
	// ReasonSuspended: Ready's reason for a GitSync suspended before its
	// first sync; one suspended later keeps its last sync's.
	ReasonSuspended = "Suspended"
	// ReasonPruned (an event): what a GitSync deleted with deletionPolicy
	// Delete took with it.
	ReasonPruned = "Pruned"
	// ReasonAdopted (a warning event): a sync took over objects that
	// existed without the GitSync's label.
	ReasonAdopted = "Adopted"
)
