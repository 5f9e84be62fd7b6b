package reconcile

import (
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/apply"
)

// LeaderElectionID is the name of the Lease the reconciler replicas compete
// for; only the holder runs controllers.
const LeaderElectionID = v1.ReconcilerLease

// ManagerOptions configures NewManager. The manager serves no endpoint:
// Run serves them for the process (Endpoints).
type ManagerOptions struct {
	// LeaderElection makes replicas elect one active reconciler.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease; it must exist.
	LeaderElectionNamespace string
	// GracefulShutdownTimeout bounds how long running reconciles may take
	// to finish after SIGTERM.
	GracefulShutdownTimeout time.Duration
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader
	// election (client-go's meaning): a standby takes over LeaseDuration
	// after the leader's last renewal, and the leader stops leading when it
	// has not renewed for RenewDeadline. Zero takes controller-runtime's
	// defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Cache, when set, amends what the informers hold (CacheOptions)
	// before the manager is built: the test harness keeps objects a
	// benchmark writes beside the controllers out of their sight with it.
	Cache func(*cache.Options)

	// leaderLock, when set, is the Lease lock of Run's process-wide
	// identity.
	leaderLock resourcelock.Interface
}

// orNil is nil for zero, for the manager options whose nil means default.
func orNil(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

// NewManager builds the manager, leader-elected if asked. The controllers
// are registered on it by their own Setup functions.
func NewManager(cfg *rest.Config, opts ManagerOptions) (ctrl.Manager, error) {
	shutdown := opts.GracefulShutdownTimeout
	informers := CacheOptions()
	if opts.Cache != nil {
		opts.Cache(&informers)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: kubescheme.Scheme,
		Cache:  informers,
		// Every write the controllers make without a field manager of its
		// own (status patches, the claim's namespace update) is recorded
		// under the reconciler's, not under the binary's name.
		Client:                              client.Options{FieldOwner: apply.FieldManager},
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		LeaderElection:                      opts.LeaderElection,
		LeaderElectionID:                    LeaderElectionID,
		LeaderElectionNamespace:             opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel:       true,
		LeaderElectionResourceLockInterface: opts.leaderLock,
		LeaseDuration:                       orNil(opts.LeaseDuration),
		RenewDeadline:                       orNil(opts.RenewDeadline),
		RetryPeriod:                         orNil(opts.RetryPeriod),
		GracefulShutdownTimeout:             &shutdown,
		// Run builds a new manager, with the same controllers, after each
		// lost lease in the same process.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create manager: %w", err)
	}
	return mgr, nil
}

// CacheOptions says what the controllers' informers hold. Its ByObject
// names every kind the controllers watch or read from the cache:
// SetupControllers registers an informer for each before the manager
// starts. Only the objects of sandboxes are cached: a cluster's other pods, policies and bindings would cost
// memory and watch traffic for nothing. Of those, the transforms keep what
// the controllers read (cachetransform.go).
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{v1.LabelManagedBy: v1.ManagedByValue})
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			// Any namespace's: a template's egress may name a Service,
			// and its hosts go through the egress gateway's.
			&corev1.Service{}:               {},
			&nodev1.RuntimeClass{}:          {},
			&v1.NodePool{}:                  {},
			&v1.WarmPool{}:                  {},
			&v1.GitSync{}:                   {},
			&corev1.Pod{}:                   {Label: managed, Transform: podTransform()},
			&corev1.Node{}:                  {Transform: nodeTransform()},
			&corev1.Namespace{}:             {Label: managed, Transform: namespaceTransform()},
			&corev1.PersistentVolumeClaim{}: {Label: managed},
			&corev1.ResourceQuota{}:         {Label: managed, Transform: quotaTransform()},
			&corev1.LimitRange{}:            {Label: managed, Transform: limitRangeTransform()},
			&networkingv1.NetworkPolicy{}:   {Label: managed, Transform: networkPolicyTransform()},
			&rbacv1.RoleBinding{}:           {Label: managed, Transform: roleBindingTransform()},
			// A GitSync may declare thousands of templates.
			&v1.SandboxTemplate{}: {Transform: templateTransform()},
			&v1.Sandbox{}:         {Transform: sandboxTransform()},
		},
		DefaultTransform: defaultTransform(),
		NewInformer:      newInformerWithoutNamespaceIndex,
	}
}

// newInformerWithoutNamespaceIndex makes an informer as controller-runtime
// does, but without the index by namespace it gives every informer. That
// index answers a List in one namespace, and no controller lists from the
// cache by namespace; yet it keeps a set of keys per namespace, and a
// sandbox's pod, policy, binding, quota and limit range each sit alone in
// theirs: about 300 bytes an object, 18 MB at 10,000 sandboxes. A List in
// a namespace from the cache fails with "index with name namespace does
// not exist"; read past the cache (GetAPIReader) instead.
func newInformerWithoutNamespaceIndex(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	indexers = maps.Clone(indexers)
	delete(indexers, toolscache.NamespaceIndex)
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}
