package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxTemplateSpec is the blueprint every sandbox of the template is
// stamped from. It holds the pod-template-like fields a sandbox may set, not
// a whole PodSpec: whatever would weaken isolation (host namespaces,
// privileged mode, service account tokens, extra volumes) is not expressible.
// +kubebuilder:validation:XValidation:rule="!has(self.command) || self.command.all(c, c.size() > 0)",message="command entries must not be empty",fieldPath=".command"
type SandboxTemplateSpec struct {
	// Image is the container image reference, e.g.
	// ghcr.io/acme/python-sandbox:3.12 or an image pinned by digest.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-fA-F0-9]{32,})?$`
	// +required
	Image string `json:"image"`

	// ImagePullPolicy of the sandbox container.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +kubebuilder:default=IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Command overrides the image's entrypoint.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Command []string `json:"command,omitempty"`

	// Args are the arguments to the command.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// WorkingDir of the command; defaults to the workspace mount path.
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	WorkingDir string `json:"workingDir,omitempty"`

	// Env is the environment of the sandbox container.
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// EnvVarsInjectionPolicy says whether a Sandbox may add or override
	// environment variables. Any override forces a cold start, because warm
	// pool members were started with the template's environment.
	// +kubebuilder:default=Disallowed
	// +optional
	EnvVarsInjectionPolicy EnvVarsInjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`

	// Ports the sandbox listens on, reachable with port-forward (and from the
	// network.ingressFrom peers).
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=containerPort
	// +listMapKey=protocol
	// +optional
	Ports []ContainerPort `json:"ports,omitempty"`

	// Resources requested by and limited for the sandbox container.
	// +kubebuilder:default={requests: {cpu: "100m", memory: "128Mi"}, limits: {cpu: "1", memory: "1Gi"}}
	// +optional
	Resources Resources `json:"resources,omitzero"`

	// SecurityContext of the sandbox container. The pod always runs as
	// non-root with every capability dropped, RuntimeDefault seccomp and no
	// privilege escalation; these fields only choose the identity.
	// +kubebuilder:default={runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532}
	// +optional
	SecurityContext SecurityContext `json:"securityContext,omitzero"`

	// Workspace is the directory the sandbox works in: a PersistentVolumeClaim
	// that survives stop/start when persistent, an emptyDir otherwise.
	// +kubebuilder:default={persistent: false}
	// +optional
	Workspace Workspace `json:"workspace,omitzero"`

	// NodePoolRef runs the sandboxes on a NodePool (and so under its runtime
	// handler, such as gVisor). Without it they run on any node with the
	// cluster's default runtime.
	// +optional
	NodePoolRef *LocalObjectReference `json:"nodePoolRef,omitempty"`

	// Network is the sandbox's network policy. Everything not allowed here
	// is denied, in both directions.
	// +kubebuilder:default={clusterDNS: false}
	// +optional
	Network Network `json:"network,omitzero"`

	// Lifecycle is the default lifetime of the template's sandboxes; a
	// Sandbox may set its own.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
}

// EnvVarsInjectionPolicy governs environment overrides on a Sandbox.
// +kubebuilder:validation:Enum=Disallowed;Allowed;Overrides
type EnvVarsInjectionPolicy string

const (
	// EnvVarsInjectionDisallowed refuses any env on a Sandbox.
	EnvVarsInjectionDisallowed EnvVarsInjectionPolicy = "Disallowed"
	// EnvVarsInjectionAllowed lets a Sandbox add variables the template does
	// not set.
	EnvVarsInjectionAllowed EnvVarsInjectionPolicy = "Allowed"
	// EnvVarsInjectionOverrides also lets a Sandbox replace the template's
	// values.
	EnvVarsInjectionOverrides EnvVarsInjectionPolicy = "Overrides"
)

// Protocol is a transport protocol.
// +kubebuilder:validation:Enum=TCP;UDP;SCTP
type Protocol string

// ContainerPort is a port the sandbox container listens on.
type ContainerPort struct {
	// Name of the port, unique within the template.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`
	// ContainerPort is the port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	ContainerPort int32 `json:"containerPort"`
	// Protocol of the port.
	// +kubebuilder:default=TCP
	// +optional
	Protocol Protocol `json:"protocol,omitempty"`
}

// Resources are compute requests and limits.
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || self.requests.all(k, !(k in self.limits) || quantity(self.requests[k]).compareTo(quantity(self.limits[k])) <= 0)",message="every request must be less than or equal to its limit"
type Resources struct {
	// Requests reserved for the sandbox (cpu, memory, ephemeral-storage).
	// +kubebuilder:validation:MaxProperties=3
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'])",message="only cpu, memory and ephemeral-storage can be requested"
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits the sandbox cannot exceed (cpu, memory, ephemeral-storage).
	// Without a memory limit a sandbox gets 1Gi (or its request, when
	// more). Without an ephemeral-storage limit it gets 10Gi, plus its
	// workspace when that is ephemeral (and at least its request): past
	// it the kubelet evicts the pod, and the sandbox starts again. A
	// default limit reserves nothing: its request stays this one's, zero
	// when unset.
	// +kubebuilder:validation:MaxProperties=3
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'])",message="only cpu, memory and ephemeral-storage can be limited"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// SecurityContext chooses the identity the sandbox runs as. Root (0) is
// refused: the pod is admitted under the restricted Pod Security level.
type SecurityContext struct {
	// RunAsUser is the UID of the sandbox process.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// RunAsGroup is the primary GID of the sandbox process.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
	// FSGroup owns the workspace volume.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	FSGroup *int64 `json:"fsGroup,omitempty"`
	// ReadOnlyRootFilesystem mounts the image read-only; the workspace stays
	// writable.
	// +optional
	ReadOnlyRootFilesystem bool `json:"readOnlyRootFilesystem,omitempty"`
}

// Workspace is the sandbox's working directory volume.
// +kubebuilder:validation:XValidation:rule="self.persistent || !has(self.storageClassName)",message="storageClassName needs persistent: true",fieldPath=".storageClassName"
type Workspace struct {
	// Persistent keeps the workspace in a PersistentVolumeClaim that survives
	// stop and start; otherwise it is an emptyDir that dies with the pod.
	// +optional
	Persistent bool `json:"persistent"`
	// Size of the workspace volume (the PVC request, or the emptyDir limit).
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(self).isGreaterThan(quantity('0'))",message="size must be greater than zero"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of the PVC; the cluster default when unset.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// MountPath of the workspace in the container.
	// +kubebuilder:default="/workspace"
	// +kubebuilder:validation:Pattern=`^/[^:]*$`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	MountPath string `json:"mountPath,omitempty"`
}

// Network is a sandbox's allow-list on top of a default deny.
type Network struct {
	// ClusterDNS allows DNS queries to the cluster resolver (kube-system,
	// port 53). Off by default: the resolver forwards any name, so a query
	// carries data out of the cluster in its name, past every egress rule.
	// Without it names do not resolve inside the sandbox; hosts rules and
	// endpoints need none (the egress gateway resolves their names), and a
	// service rule's Service is reached at its cluster IP.
	// +kubebuilder:default=false
	// +optional
	ClusterDNS *bool `json:"clusterDNS,omitempty"`
	// Egress lists the destinations the sandbox may reach: address ranges
	// (cidr), host names (hosts, through the egress gateway) or in-cluster
	// Services (service). The cloud metadata range (169.254.0.0/16) and
	// cluster-internal ranges stay blocked unless a cidr rule names them
	// explicitly.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Egress []EgressRule `json:"egress,omitempty"`
	// Endpoints are upstream APIs the sandbox reaches through the egress
	// gateway at a plain-HTTP address of its own (announced in the
	// sandbox's environment as AGENTSANDBOX_ENDPOINT_<NAME>), with a
	// credential the gateway adds on the way out: the key stays in a Secret
	// the sandbox, and its owner, cannot read.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// IngressFrom lists the pods that may connect to the sandbox's ports.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	IngressFrom []IngressPeer `json:"ingressFrom,omitempty"`
}

// EgressRule allows traffic to one kind of destination, optionally on some
// ports only: an address range (cidr, enforced by the NetworkPolicy), host
// names (hosts, enforced by the egress gateway, which the sandbox reaches
// as its HTTP(S) proxy) or an in-cluster Service (service, enforced by the
// NetworkPolicy, following the Service's pods).
// +kubebuilder:validation:XValidation:rule="[has(self.cidr), has(self.hosts), has(self.service)].filter(x, x).size() == 1",message="set exactly one of cidr, hosts or service"
// +kubebuilder:validation:XValidation:rule="!(has(self.except) && has(self.hosts))",message="except carves ranges out of a cidr rule; a hosts rule has none"
// +kubebuilder:validation:XValidation:rule="!(has(self.except) && has(self.service))",message="except carves ranges out of a cidr rule; a service rule has none"
type EgressRule struct {
	// CIDR the sandbox may reach, e.g. 0.0.0.0/0 or 140.82.112.0/20.
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",messageExpression="'\"' + self + '\" is not a CIDR such as 10.0.0.0/8 or 2001:db8::/32'"
	// +optional
	CIDR string `json:"cidr,omitempty"`
	// Except carves ranges out of CIDR.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="except entries must be CIDRs"
	// +listType=atomic
	// +optional
	Except []string `json:"except,omitempty"`
	// Hosts the sandbox may reach by name through the egress gateway:
	// exact names such as pypi.org, or *.example.com for every name below
	// example.com (not example.com itself). The gateway resolves the name
	// and refuses an answer in a private, loopback, link-local or cluster
	// range unless a cidr rule allows that address.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^([*][.])?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?[.])*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`
	// +listType=atomic
	// +optional
	Hosts []string `json:"hosts,omitempty"`
	// Service allows the pods behind an in-cluster Service, such as a
	// self-hosted model or a package mirror. The policy follows the
	// Service's selector, so its pods may come and go; Ports name the
	// Service's ports and are translated to the pods' target ports.
	// +optional
	Service *ServiceReference `json:"service,omitempty"`
	// Ports limits the rule to these ports; all ports when empty.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Ports []NetworkPort `json:"ports,omitempty"`
}

// ServiceReference names a Service in a namespace.
type ServiceReference struct {
	// Namespace of the Service.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`
	// Name of the Service.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
}

// Endpoint is an upstream API served to the sandbox by the egress gateway,
// which adds the credential on the way out.
type Endpoint struct {
	// Name of the endpoint: its path on the gateway (/endpoints/NAME) and
	// its variable in the sandbox (AGENTSANDBOX_ENDPOINT_NAME, upper case,
	// dashes as underscores).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
	// URL of the upstream, e.g. https://api.openai.com or, for an
	// in-cluster model, http://vllm.models.svc:8000. A request to the
	// endpoint's address plus a path goes to this URL plus that path. An
	// https upstream's certificate is verified.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[-a-z0-9.:\[\]]+(/[^?#]*)?$`
	// +required
	URL string `json:"url"`
	// Credential the gateway adds to every request; none when unset.
	// +optional
	Credential *EndpointCredential `json:"credential,omitempty"`
}

// EndpointCredential is a header the gateway sets from a Secret.
type EndpointCredential struct {
	// SecretRef is the Secret's key holding the credential. The egress
	// gateway must be allowed to read it (the install manifests let it
	// read Secrets in agentsandbox-system); the sandbox's owner need not,
	// and should not, be.
	// +required
	SecretRef SecretKeyReference `json:"secretRef"`
	// Header the credential goes in, e.g. Authorization or x-api-key. The
	// gateway replaces any value the sandbox sent.
	// +kubebuilder:default=Authorization
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9]*$`
	// +optional
	Header string `json:"header,omitempty"`
	// Prefix goes before the credential in the header, e.g. "Bearer ".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Prefix string `json:"prefix,omitempty"`
}

// SecretKeyReference names a key of a Secret in a namespace.
type SecretKeyReference struct {
	// Namespace of the Secret.
	// +kubebuilder:default=agentsandbox-system
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
	// Key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// NetworkPort is a port or port range of a network rule.
// +kubebuilder:validation:XValidation:rule="!has(self.endPort) || self.endPort >= self.port",message="endPort must not be lower than port",fieldPath=".endPort"
type NetworkPort struct {
	// Port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`
	// EndPort makes the rule a range port..endPort.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	EndPort *int32 `json:"endPort,omitempty"`
	// Protocol of the port.
	// +kubebuilder:default=TCP
	// +optional
	Protocol Protocol `json:"protocol,omitempty"`
}

// IngressPeer selects pods allowed to connect to a sandbox, by the labels of
// their namespace and of the pods themselves.
// +kubebuilder:validation:XValidation:rule="has(self.namespaceLabels) || has(self.podLabels)",message="set namespaceLabels, podLabels or both"
type IngressPeer struct {
	// NamespaceLabels the peer's namespace must carry.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
	// PodLabels the peer pod must carry.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// Ports limits the peer to these sandbox ports; all ports when empty.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Ports []NetworkPort `json:"ports,omitempty"`
}

// Lifecycle is how long a sandbox lives and what happens when it ends.
type Lifecycle struct {
	// TTL is the lifetime measured from the sandbox's creation, e.g. 8h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// ShutdownPolicy is what happens when the lifetime ends.
	// +kubebuilder:default=Stop
	// +optional
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`
	// IdleTimeout stops a Running sandbox (workspace kept, reason
	// IdleTimeout) when nobody has used it for this long, e.g. 15m. Use is
	// what a person or an agent does through this project's clients: a
	// command (for as long as it runs), a terminal session, a file
	// operation, an SSH channel, a port-forward connection, the page's
	// terminal, an MCP call. Unset, sandboxes never stop for idleness. A
	// Sandbox may shorten it, never lengthen it.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
	// WakeOnConnect lets a client that connects to a sandbox stopped for
	// idleness (exec, attach, cp, ssh, port-forward, MCP, the page) start
	// it again and wait for it, instead of failing. A sandbox its owner
	// stopped is never woken. Default true.
	// +optional
	WakeOnConnect *bool `json:"wakeOnConnect,omitempty"`
	// DeleteAfterStopped deletes a sandbox that has stayed stopped this long
	// (for idleness, by its owner, or at the end of its lifetime), e.g. 72h.
	// Unset, a stopped sandbox is kept until deleted.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	DeleteAfterStopped *metav1.Duration `json:"deleteAfterStopped,omitempty"`
}

// WakesOnConnect reports whether clients may wake the lifecycle's
// sandboxes when stopped for idleness: true unless WakeOnConnect is false.
func (l *Lifecycle) WakesOnConnect() bool {
	return l == nil || l.WakeOnConnect == nil || *l.WakeOnConnect
}

// SandboxTemplateStatus is the observed state of a SandboxTemplate.
type SandboxTemplateStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ContentHash is a hash of the parts of the spec that shape a sandbox;
	// warm pools roll their members when it changes.
	// +optional
	ContentHash string `json:"contentHash,omitempty"`
	// Conditions: Ready (valid and every reference resolves), Reconciling,
	// Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxTemplate is the blueprint of a sandbox: image, command,
// environment, ports, resources, identity, workspace, node pool and network
// allow-list.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sbxt,categories=agentsandbox
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.metadata.name.size() <= 63",message="metadata.name must be a DNS label of at most 63 characters: it appears in labels of every sandbox stamped from it"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Node Pool",type=string,JSONPath=`.spec.nodePoolRef.name`
// +kubebuilder:printcolumn:name="Persistent",type=boolean,JSONPath=`.spec.workspace.persistent`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxTemplateSpec `json:"spec"`
	// +optional
	Status SandboxTemplateStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (fluxcd/pkg/runtime Getter).
func (in *SandboxTemplate) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions (fluxcd/pkg/runtime Setter).
func (in *SandboxTemplate) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// SandboxTemplateList is a list of SandboxTemplates.
//
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

func init() {
	register(&SandboxTemplate{}, &SandboxTemplateList{})
}
