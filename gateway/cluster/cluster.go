// Package cluster is what the egress gateway knows of the cluster: which
// sandbox a connection comes from, read from informer caches of the
// sandbox pods, the Sandboxes and their templates, and the credentials of
// endpoints, read from Secrets. The gateway asks on every connection, so
// both answer from memory.
package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gateway"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// Index names of the Directory's cache.
const (
	podIP            = "status.podIP"     // on Pod
	sandboxNamespace = "status.namespace" // on Sandbox
)

// Directory answers "which sandbox is this address" from the caches.
type Directory struct {
	cache cache.Cache
}

var _ gateway.Directory = (*Directory)(nil)

// NewDirectory starts caches of the sandbox pods (only what the lookup
// needs of them: their namespace, template label and addresses), the
// Sandboxes and the templates, and returns once they are synced or ctx
// ends.
func NewDirectory(ctx context.Context, cfg *rest.Config) (*Directory, error) {
	managed := labels.SelectorFromSet(labels.Set{v1.LabelManagedBy: v1.ManagedByValue})
	c, err := cache.New(cfg, cache.Options{
		Scheme: kubescheme.Scheme,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: managed, Transform: slimPod},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	if err := c.IndexField(ctx, &corev1.Pod{}, podIP, func(o client.Object) []string {
		pod := o.(*corev1.Pod)
		if pod.Name != environment.PodName || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return nil // an ended pod's address may already be another's
		}
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return ips
	}); err != nil {
		return nil, err
	}
	if err := c.IndexField(ctx, &v1.Sandbox{}, sandboxNamespace, func(o client.Object) []string {
		if ns := o.(*v1.Sandbox).Status.Namespace; ns != "" {
			return []string{ns}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Informers start on first use; ask for each now so that the sync
	// below waits for all of them.
	for _, obj := range []client.Object{&corev1.Pod{}, &v1.Sandbox{}, &v1.SandboxTemplate{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the caches of pods, Sandboxes and SandboxTemplates did not sync: %w", context.Cause(ctx))
	}
	return &Directory{cache: c}, nil
}

// slimPod keeps what the lookup reads of a pod: a node's worth of sandbox
// pods then costs little more than their addresses.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, Labels: map[string]string{v1.LabelTemplate: pod.Labels[v1.LabelTemplate]},
			ResourceVersion: pod.ResourceVersion,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIPs: pod.Status.PodIPs},
	}, nil
}

// Client finds the sandbox pod holding addr, the Sandbox it runs for (none
// for a warm pool member nobody has claimed) and its template.
func (d *Directory) Client(addr netip.Addr) (gateway.Client, bool) {
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := d.cache.List(ctx, pods, client.MatchingFields{podIP: addr.Unmap().String()}, client.UnsafeDisableDeepCopy); err != nil || len(pods.Items) != 1 {
		return gateway.Client{}, false
	}
	pod := &pods.Items[0]
	tpl := &v1.SandboxTemplate{}
	if err := d.cache.Get(ctx, types.NamespacedName{Name: pod.Labels[v1.LabelTemplate]}, tpl); err != nil {
		return gateway.Client{}, false
	}
	out := gateway.Client{Sandbox: pod.Namespace, Network: &tpl.Spec.Network}
	sandboxes := &v1.SandboxList{}
	if err := d.cache.List(ctx, sandboxes, client.MatchingFields{sandboxNamespace: pod.Namespace}, client.UnsafeDisableDeepCopy); err == nil && len(sandboxes.Items) == 1 {
		out.Sandbox, out.Owner = sandboxes.Items[0].Name, sandboxes.Items[0].Spec.Owner
	}
	return out, true
}

// Secrets reads endpoint credentials, each kept for ttl: a rotated Secret
// takes effect within ttl, without a restart, and a busy endpoint costs
// one read per ttl.
type Secrets struct {
	reader client.Reader
	ttl    time.Duration
	now    func() time.Time

	mu   sync.Mutex
	kept map[v1.SecretKeyReference]keptSecret
}

type keptSecret struct {
	value []byte
	at    time.Time
}

var _ gateway.Secrets = (*Secrets)(nil)

// NewSecrets reads through reader (uncached: the gateway may read only the
// Secrets it is granted, so it cannot list and watch them).
func NewSecrets(reader client.Reader, ttl time.Duration) *Secrets {
	return &Secrets{reader: reader, ttl: ttl, now: time.Now, kept: map[v1.SecretKeyReference]keptSecret{}}
}

// Credential returns the value of ref's key.
func (s *Secrets) Credential(ctx context.Context, ref v1.SecretKeyReference) ([]byte, error) {
	if ref.Namespace == "" {
		ref.Namespace = v1.SystemNamespace
	}
	s.mu.Lock()
	k, ok := s.kept[ref]
	s.mu.Unlock()
	if ok && s.now().Sub(k.at) < s.ttl {
		return k.value, nil
	}
	secret := &corev1.Secret{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		return nil, fmt.Errorf("failed to read Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	value, ok := secret.Data[ref.Key]
	if !ok || len(value) == 0 {
		return nil, fmt.Errorf("the Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key)
	}
	s.mu.Lock()
	s.kept[ref] = keptSecret{value: value, at: s.now()}
	s.mu.Unlock()
	return value, nil
}
