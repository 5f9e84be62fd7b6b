// Package environment is the blueprint of a sandbox environment: the
// namespace, its NetworkPolicy, ResourceQuota, LimitRange, the owner's
// RoleBinding, the workspace and the pod, built from a template for a
// Sandbox (a cold start) or for a warm pool member (claimed later). Both the
// sandbox and the warm pool controllers build from it, so a claimed member
// is exactly what a cold start would have made, and neither controller
// imports the other.
package environment

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// Names of the objects in every sandbox namespace. Fixed names make the
// objects easy to find and impossible to duplicate.
const (
	PodName       = "sandbox"
	ContainerName = "sandbox"
	// OwnerClusterRole grants exec, port-forward and log access to pods; a
	// RoleBinding in the sandbox namespace scopes it to the sandbox. Binding
	// a shipped ClusterRole (the reconciler may only `bind` that one) keeps
	// the reconciler from needing exec rights itself, which creating an
	// equivalent Role would require.
	OwnerClusterRole = "agentsandbox-sandbox-owner"
	// QuotaName is the ResourceQuota's, which its refusals quote.
	QuotaName = "sandbox"
	// NamespacePrefix makes sandbox namespaces recognisable and keeps a
	// sandbox named "kube-system" from claiming that namespace.
	NamespacePrefix = "sandbox-"
)

// NamespaceName is the namespace a sandbox runs in.
func NamespaceName(sandboxName string) string { return NamespacePrefix + sandboxName }

// Blueprint is everything the objects of one sandbox environment are
// derived from. The environment is a sandbox's own (cold start) or a warm
// pool member waiting to be claimed; claiming turns the second into the
// first by relabelling and re-owning the namespace and binding the owner.
type Blueprint struct {
	// namespace the environment lives in.
	namespace string
	// labels go on the namespace, the pod and the workspace claim.
	labels map[string]string
	// controller owns the namespace: the Sandbox; nil for a member, which
	// its pool's finalizer deletes instead (v1alpha1.LabelWarmPoolUID).
	controller *metav1.OwnerReference
	// owner is the sandbox owner's identity; empty for a pool member, which
	// nobody may enter.
	owner    string
	template *v1.SandboxTemplate
	// nodePool is nil when the template runs on the default runtime.
	nodePool *v1.NodePool
	// env is the template's environment with the sandbox's overrides.
	env []v1.EnvVar
	// gateImage installs the sandbox agent and holds the pod's own
	// processes back until its egress policy is enforced, when gateProves
	// (WithEgressGate); empty for none.
	gateImage  string
	gateProves bool
	// egress is what the template's egress rules resolve to (WithEgress).
	egress Egress
}

func managedLabels() map[string]string {
	return map[string]string{v1.LabelManagedBy: v1.ManagedByValue}
}

// ForSandbox is the environment of a sandbox in namespace.
func ForSandbox(sbx *v1.Sandbox, namespace string, tpl *v1.SandboxTemplate, pool *v1.NodePool, env []v1.EnvVar) Blueprint {
	l := managedLabels()
	l[v1.LabelSandbox] = sbx.Name
	l[v1.LabelSandboxUID] = string(sbx.UID)
	l[v1.LabelOwner] = OwnerLabel(sbx.Spec.Owner)
	l[v1.LabelTemplate] = tpl.Name
	if ref := sbx.Spec.WarmPoolRef; ref != nil {
		l[v1.LabelWarmPool] = ref.Name
	}
	return Blueprint{
		namespace: namespace, labels: l, owner: sbx.Spec.Owner, template: tpl, nodePool: pool, env: env,
		controller: ptr.To(ControllerRef(v1.KindSandbox, sbx)),
	}
}

// ControllerRef makes obj the controller of what it is put on, blocking
// obj's deletion until garbage collection has deleted it.
func ControllerRef(kind string, obj metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1.GroupVersion.String(), Kind: kind, Name: obj.GetName(), UID: obj.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// OwnerLabel maps an identity such as "system:serviceaccount:ci:agent" or
// "alice@example.com" to a label value; identities that had to be changed or
// shortened get a hash suffix so two owners never share a value.
func OwnerLabel(owner string) string {
	safe := strings.Trim(labelUnsafe.ReplaceAllString(owner, "_"), "_.-")
	if safe == owner && len(safe) <= 63 {
		return safe
	}
	sum := sha256.Sum256([]byte(owner))
	suffix := hex.EncodeToString(sum[:4])
	if len(safe) > 54 {
		safe = safe[:54]
	}
	return strings.Trim(safe, "_.-") + "-" + suffix
}

// WithEgress builds the environment's policy and pod with what the
// template's egress rules resolve to (ResolveEgress).
func (b Blueprint) WithEgress(e Egress) Blueprint {
	b.egress = e
	return b
}

// Namespace is the name of the environment's namespace.
func (b Blueprint) Namespace() string { return b.namespace }

// NamespaceObject is owned by its controller, so deleting the Sandbox
// deletes the namespace and, with it, everything inside; a member's is
// deleted by its pool.
func (b Blueprint) NamespaceObject() *corev1.Namespace {
	l := maps.Clone(b.labels)
	l["pod-security.kubernetes.io/enforce"] = "restricted"
	l["pod-security.kubernetes.io/enforce-version"] = "latest"
	l["pod-security.kubernetes.io/warn"] = "restricted"
	l["pod-security.kubernetes.io/audit"] = "restricted"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: b.namespace, Labels: l,
	}}
	if b.controller != nil {
		ns.OwnerReferences = []metav1.OwnerReference{*b.controller}
	}
	if b.owner != "" {
		ns.Annotations = map[string]string{v1.AnnotationOwner: b.owner}
	}
	return ns
}

// Isolation are the objects that confine the environment, besides the
// namespace itself: policy, quota, limits and, when persistent, the
// workspace claim.
func (b Blueprint) Isolation(blocked []netip.Prefix) []client.Object {
	objs := []client.Object{networkPolicy(b.namespace, b.template.Spec.Network, blocked, b.egress), b.ResourceQuota(), b.limitRange()}
	if pvc := b.workspaceClaim(); pvc != nil {
		objs = append(objs, pvc)
	}
	return objs
}

// overhead is the node pool runtime's per-pod cost, which quota counts.
func (b Blueprint) overhead() corev1.ResourceList {
	if b.nodePool == nil {
		return nil
	}
	return b.nodePool.Spec.Overhead
}

// podsQuota is how many sandbox pods a namespace may hold at once: the
// running one and its replacement. A stopped-and-started or restarted
// sandbox briefly has both (the old pod terminating), and quota usage the
// admission plugin charged for a create that then failed stays charged until
// the quota controller recounts, minutes later; with room for one pod only,
// either would block the sandbox's start.
const podsQuota = 2

// ResourceQuota caps the namespace at podsQuota pods of the template's size
// (plus the runtime overhead) and at most the workspace volume. The
// LimitRange keeps each container to the template's size.
func (b Blueprint) ResourceQuota() *corev1.ResourceQuota {
	hard := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(podsQuota, resource.DecimalSI)}
	res := b.template.Spec.Resources
	for name, q := range res.Requests {
		hard["requests."+name] = times(plus(q, b.overhead()[name]), podsQuota)
	}
	for name, q := range res.Limits {
		hard["limits."+name] = times(plus(q, b.overhead()[name]), podsQuota)
	}
	ws := b.template.Spec.Workspace
	if ws.Persistent {
		hard[corev1.ResourcePersistentVolumeClaims] = resource.MustParse("1")
		hard[corev1.ResourceRequestsStorage] = ws.SizeOrDefault()
	} else {
		hard[corev1.ResourcePersistentVolumeClaims] = resource.MustParse("0")
	}
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: QuotaName, Namespace: b.namespace, Labels: managedLabels()},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
}

func plus(a, b resource.Quantity) resource.Quantity {
	a.Add(b)
	return a
}

func times(q resource.Quantity, n int64) resource.Quantity {
	out := q.DeepCopy()
	for i := int64(1); i < n; i++ {
		out.Add(q)
	}
	return out
}

// limitRange gives any container the template's resources by default and
// caps it there, so nothing started in the namespace outgrows the template.
func (b Blueprint) limitRange() *corev1.LimitRange {
	res := b.template.Spec.Resources
	return &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: b.namespace, Labels: managedLabels()},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        res.Limits,
			DefaultRequest: res.Requests,
			Max:            res.Limits,
		}}},
	}
}

// ownerSubject is the RBAC subject of a Kubernetes identity.
func ownerSubject(owner string) rbacv1.Subject {
	if rest, ok := strings.CutPrefix(owner, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
		}
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: owner}
}

// RoleBinding lets the owner, and only the owner, use the sandbox's pod.
func (b Blueprint) RoleBinding() *rbacv1.RoleBinding {
	return ownerBinding(b.namespace, managedLabels(), ownerSubject(b.owner))
}

// OwnerBindingName is the owner's RoleBinding's, one per sandbox
// namespace: in a warm member, the create of it is the claim.
const OwnerBindingName = "sandbox-owner"

// ownerBinding binds the owner's ClusterRole in namespace to subjects.
func ownerBinding(namespace string, labels map[string]string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: OwnerBindingName, Namespace: namespace, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: OwnerClusterRole},
		Subjects:   subjects,
	}
}

// workspaceClaim is the persistent workspace; nil for an ephemeral one.
func (b Blueprint) workspaceClaim() *corev1.PersistentVolumeClaim {
	ws := b.template.Spec.Workspace
	if !ws.Persistent {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		// Only the managed-by label: a claimed member's claim then already
		// matches its sandbox, and a claim costs no write here.
		ObjectMeta: metav1.ObjectMeta{Name: v1.WorkspaceName, Namespace: b.namespace, Labels: managedLabels()},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ws.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: ws.SizeOrDefault()}},
		},
	}
}

// containerResources are the template's requests and limits, with the
// two limits a sandbox must not go without where it sets none: memory
// (DefaultMemoryLimit) and ephemeral storage (DefaultEphemeralStorage plus
// the workspace when the workspace is an emptyDir, which the kubelet counts
// toward the pod's total); either never below the template's request. A
// default limit comes with the template's request for it, zero when it
// has none, stated: left out, the API server would copy the limit into the
// request, and every sandbox would reserve 10Gi of its node's disk, which
// fills a node with a few sandboxes long before its disk is used.
func (b Blueprint) containerResources() corev1.ResourceRequirements {
	res := b.template.Spec.Resources
	storage := resource.MustParse(v1.DefaultEphemeralStorage)
	if ws := b.template.Spec.Workspace; !ws.Persistent {
		storage.Add(ws.SizeOrDefault())
	}
	defaults := corev1.ResourceList{
		corev1.ResourceMemory:           resource.MustParse(v1.DefaultMemoryLimit),
		corev1.ResourceEphemeralStorage: storage,
	}
	out := corev1.ResourceRequirements{Requests: maps.Clone(res.Requests), Limits: maps.Clone(res.Limits)}
	for name, limit := range defaults {
		if _, set := out.Limits[name]; set {
			continue
		}
		request, requested := res.Requests[name]
		if requested && request.Cmp(limit) > 0 {
			limit = request
		}
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Limits[name] = limit
		if !requested {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[name] = resource.MustParse("0")
		}
	}
	return out
}

// noResolver is the nameserver of a sandbox without cluster DNS: loopback,
// where nothing answers (glibc's own default when resolv.conf names none).
const noResolver = "127.0.0.1"

// Pod is the sandbox itself: non-root, no capabilities, no privilege
// escalation, RuntimeDefault seccomp, no service account token, on the node
// pool's runtime. RuntimeClass admission adds the pool's node selector,
// tolerations and overhead.
func (b Blueprint) Pod() *corev1.Pod {
	spec := b.template.Spec
	ws := spec.Workspace
	mountPath := ws.MountPathOrDefault()
	workingDir := spec.WorkingDir
	if workingDir == "" {
		workingDir = mountPath
	}
	volume := corev1.Volume{Name: v1.WorkspaceName}
	if ws.Persistent {
		volume.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v1.WorkspaceName}
	} else {
		volume.EmptyDir = &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(ws.SizeOrDefault())}
	}
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	container := corev1.Container{
		Name:            ContainerName,
		Image:           spec.Image,
		ImagePullPolicy: spec.ImagePullPolicy,
		Command:         spec.Command,
		Args:            spec.Args,
		WorkingDir:      workingDir,
		Resources:       b.containerResources(),
		VolumeMounts:    []corev1.VolumeMount{{Name: v1.WorkspaceName, MountPath: mountPath}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Privileged:               ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   ptr.To(spec.SecurityContext.ReadOnlyRootFilesystem),
			SeccompProfile:           seccomp,
		},
	}
	container.Env = b.egress.podEnv(spec.Network, b.env)
	for _, e := range b.env {
		container.Env = append(container.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	for _, p := range spec.Ports {
		proto := corev1.Protocol(p.Protocol)
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, Protocol: proto})
	}
	// The member label lives on the namespace only: a claim relabels the
	// namespace, and a copy on the pod would go stale.
	labels := maps.Clone(b.labels)
	delete(labels, v1.LabelMember)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: PodName, Namespace: b.namespace, Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      spec.SecurityContext.RunAsUser,
				RunAsGroup:     spec.SecurityContext.RunAsGroup,
				FSGroup:        spec.SecurityContext.FSGroup,
				SeccompProfile: seccomp,
				Sysctls:        icmpSysctls(spec.Network),
			},
			Containers:  []corev1.Container{container},
			Volumes:     []corev1.Volume{volume},
			HostAliases: b.egress.serviceHosts(spec.Network),
		},
	}
	if b.gateImage != "" {
		pod.Spec.InitContainers = []corev1.Container{b.gateContainer(container)}
		pod.Spec.Volumes = append(pod.Spec.Volumes, agentVolume())
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: v1.AgentVolumeName, MountPath: v1.AgentDir, ReadOnly: true})
	}
	if b.nodePool != nil {
		pod.Spec.RuntimeClassName = ptr.To(b.nodePool.Name)
	}
	if !spec.Network.AllowsClusterDNS() {
		// No resolver the policy blocks: a lookup would wait on it, 5 s
		// a try for each of the kubelet's search domains in turn, where
		// loopback refuses it at once.
		pod.Spec.DNSPolicy = corev1.DNSNone
		pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{noResolver}}
	}
	if b.egress.Gateway != nil {
		pod.Annotations = map[string]string{v1.AnnotationEgressGateway: b.egress.gatewayURL()}
	}
	return pod
}

// MergeEnv applies the sandbox's environment to the template's as the
// template's envVarsInjectionPolicy allows, or says why it may not.
func MergeEnv(tpl v1.SandboxTemplateSpec, overrides []v1.EnvVar) ([]v1.EnvVar, error) {
	if len(overrides) == 0 {
		return tpl.Env, nil
	}
	policy := tpl.EnvVarsInjectionPolicy
	if policy == "" || policy == v1.EnvVarsInjectionDisallowed {
		return nil, fmt.Errorf("spec.env is set but the template's envVarsInjectionPolicy is Disallowed")
	}
	merged := append([]v1.EnvVar(nil), tpl.Env...)
	index := map[string]int{}
	for i, e := range merged {
		index[e.Name] = i
	}
	for _, e := range overrides {
		i, exists := index[e.Name]
		switch {
		case !exists:
			merged = append(merged, e)
		case policy == v1.EnvVarsInjectionOverrides:
			merged[i] = e
		default:
			return nil, fmt.Errorf("spec.env[%s] overrides a template variable, which envVarsInjectionPolicy Allowed does not permit (Overrides would)", e.Name)
		}
	}
	return merged, nil
}
