package v1alpha1

// Category is the kubectl category every kind of this API belongs to, so
// `kubectl get agentsandbox` lists them all.
const Category = "agentsandbox"

// Condition types shared by the kinds. They follow kstatus: Ready is the
// summary, Reconciling means work is in progress and Stalled means the
// controller cannot make progress without a change to the spec.
const (
	ReadyCondition       = "Ready"
	ReconcilingCondition = "Reconciling"
	StalledCondition     = "Stalled"
)

// MissingReference reports whether a Ready reason says the object names
// another that does not exist: not Stalled, since creating the other heals
// it without a change to this one, but what a wait for readiness
// (Terraform's) need not wait out when nothing creates it.
func MissingReference(reason string) bool { return missingReferences[reason] }

// missingReferences are the reasons MissingReference recognises, named
// one by one: a reason is one by what it means, not by how it is spelt.
var missingReferences = map[string]bool{
	ReasonTemplateNotFound:       true,
	ReasonWarmPoolNotFound:       true,
	ReasonNodePoolNotFound:       true,
	ReasonServiceNotFound:        true,
	ReasonServiceAccountNotFound: true,
}

// WorkspaceName names the workspace volume of every sandbox pod, and its
// PersistentVolumeClaim when the workspace is persistent. It lives beside
// the types so that the controller that makes the volume and the clients
// that find the workspace's mount by it (sandboxclient) agree.
const WorkspaceName = "workspace"

// AgentVolumeName names the volume through which every sandbox pod's init
// container hands the sandbox agent (cmd/agentsandbox-agent) to the sandbox,
// and AgentPath is where the sandbox's container finds it. Clients open a
// session through the agent only where the pod mounts that volume.
const (
	AgentVolumeName = "agentsandbox-agent"
	AgentDir        = "/.agentsandbox"
	AgentPath       = AgentDir + "/agentsandbox-agent"
)

// Labels and annotations the controllers put on the objects they create. They
// live here, beside the types, so the reconciler, the CLI and the provider
// select on the same keys.
const (
	// LabelManagedBy marks every object a controller of this project owns.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "agentsandbox"
	// LabelSandbox names the Sandbox a namespace, pod or volume belongs to.
	LabelSandbox = "agentsandbox.dev/sandbox"
	// LabelSandboxUID carries the UID of the Sandbox a namespace was created
	// or claimed for. Names are reused (a Sandbox deleted and created again,
	// an admin's namespace of the same name); the UID is not, and the label
	// outlives the owner reference that an orphaning delete strips, so the
	// controller can still tell and remove an environment whose Sandbox is
	// gone.
	LabelSandboxUID = "agentsandbox.dev/sandbox-uid"
	// LabelOwner carries a label-safe form of the sandbox owner.
	LabelOwner = "agentsandbox.dev/owner"
	// LabelTemplate names the SandboxTemplate an object was stamped from.
	LabelTemplate = "agentsandbox.dev/template"
	// LabelWarmPool names the WarmPool an object belongs to.
	LabelWarmPool = "agentsandbox.dev/warm-pool"
	// LabelWarmPoolUID carries, on a member's namespace, the UID of the
	// WarmPool that built it. A member has no owner reference: a claimed
	// member stays labelled as one until its relabel, which waits for a
	// pause in claims, and a pool's garbage collection would take it with
	// the pool meanwhile. The pool's finalizer deletes its unclaimed
	// members instead, and the UID tells them from those of an earlier
	// pool of the same name.
	LabelWarmPoolUID = "agentsandbox.dev/warm-pool-uid"
	// LabelMember marks a warm pool member's namespace: MemberAvailable
	// until a Sandbox claims it, MemberClaimed after. On the owner's
	// RoleBinding in a member it says who took the member: a claim
	// (MemberClaimed) or the pool deleting it (MemberTrimmed). That
	// binding's create is what takes a member; the namespace is relabelled
	// after the sandbox is Ready.
	LabelMember = "agentsandbox.dev/member"
	// LabelTemplateHash is the template content hash a member was built
	// from; a different hash makes the member stale.
	LabelTemplateHash = "agentsandbox.dev/template-hash"
	// LabelNodePool names the NodePool a node belongs to.
	LabelNodePool = "agentsandbox.dev/node-pool"
	// AnnotationReconcileRequestedAt asks a controller for an immediate
	// reconcile when its value changes (the same contract as Flux's
	// reconcile.fluxcd.io/requestedAt).
	AnnotationReconcileRequestedAt = "agentsandbox.dev/reconcile-requested-at"
	// AnnotationPrune set to "disabled" keeps an object a GitSync applied when
	// a later revision no longer declares it.
	AnnotationPrune = "agentsandbox.dev/prune"
	// LabelGitSync names the GitSync (or `agentsandbox sync --once --name`)
	// that last applied an object. Prune deletes only objects carrying its
	// own name, so an object moved from one GitSync's repository to
	// another's is not deleted by the first: both share the field manager,
	// and the inventory alone cannot tell.
	LabelGitSync = "agentsandbox.dev/gitsync"
	// AnnotationChangedBy is stamped on every Sandbox create and update by
	// the shipped MutatingAdmissionPolicy with the requesting identity, so
	// events can name who asked for a transition.
	AnnotationChangedBy = "agentsandbox.dev/changed-by"
	// AnnotationOwner keeps the full owner identity on a sandbox's
	// namespace; LabelOwner holds a label-safe form of it.
	AnnotationOwner = "agentsandbox.dev/owner"
	// AnnotationClaimedAt records on a claimed member (its owner's
	// RoleBinding, then its namespace) when the claim happened, written by
	// the claim itself at no extra cost.
	AnnotationClaimedAt = "agentsandbox.dev/claimed-at"
	// AnnotationEgressGateway records on a sandbox's pod the egress
	// gateway address its processes were given in their proxy variables
	// (the gateway Service's cluster IP and port), fixed when the pod was
	// made. When the Service is recreated with another address, a warm
	// member given the old one is replaced and not handed out, and a
	// running sandbox gets a Warning event (EgressGatewayMoved).
	AnnotationEgressGateway = "agentsandbox.dev/egress-gateway"
	// AnnotationLastActivity is the clients' coarse record of a sandbox's
	// last use (RFC 3339, UTC), written by its owner's client at most once
	// per quarter of the idle timeout (and never more than once a second)
	// while the sandbox is used, never per command. A value later than an
	// idle stop wakes the sandbox.
	AnnotationLastActivity = "agentsandbox.dev/last-activity"
	// AnnotationOwnedTaints records, on a node, the taints (key and effect) that
	// its pool put there. It is written in the same request as the taints, so the
	// record can never disagree with the node: a taint dropped from the pool's
	// spec, or every taint of a node that leaves the pool, is removed by reading
	// it, while taints an administrator or the node lifecycle controller set are
	// never touched.
	AnnotationOwnedTaints = "agentsandbox.dev/node-pool-taints"
)

// Values of LabelMember.
const (
	MemberAvailable = "available"
	MemberClaimed   = "claimed"
	MemberTrimmed   = "trimmed"
)

// LocalObjectReference names another cluster-scoped object of this API.
type LocalObjectReference struct {
	// Name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
}

// ShutdownPolicy says what happens to a sandbox when its lifetime ends.
// +kubebuilder:validation:Enum=Stop;Delete
type ShutdownPolicy string

const (
	// ShutdownPolicyStop deletes the pod and keeps the namespace and the
	// workspace, so the sandbox can be started again.
	ShutdownPolicyStop ShutdownPolicy = "Stop"
	// ShutdownPolicyDelete deletes the sandbox and everything it owns.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
)

// EnvVar is an environment variable set in the sandbox container. Values are
// literal: a sandbox lives in its own namespace and must not read the
// platform's Secrets.
type EnvVar struct {
	// Name of the variable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	// +required
	Name string `json:"name"`
	// Value of the variable.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Value string `json:"value,omitempty"`
}
