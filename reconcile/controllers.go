package reconcile

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/gitsync"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/nodepool"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/sandbox"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/template"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/warmpool"
)

// Options configure the reconciler's controllers.
type Options struct {
	// Namespace is the reconciler's own: GitSyncs' credentials Secrets and
	// ServiceAccounts are read from it. Empty is v1.SystemNamespace, where
	// config/ installs the reconciler.
	Namespace string
	// EgressGateImage is an image with cmd/sandbox-gate at /sandbox-gate,
	// which every sandbox and warm member pod runs first, holding its own
	// processes back until its egress policy is enforced. Empty runs no
	// gate: code that starts with the pod may reach what the policy denies
	// for the moment the enforcer takes to program it.
	EgressGateImage string
	// EgressGateway is the Service of the egress gateway (config/gateway)
	// that templates' hosts rules and endpoints go through. Empty: such
	// templates' sandboxes are refused with reason InvalidEgress.
	EgressGateway types.NamespacedName
}

// SetupControllers registers every controller of the reconciler with mgr,
// and an informer for every kind they cache.
func SetupControllers(mgr ctrl.Manager, opts Options) error {
	if err := registerInformers(mgr); err != nil {
		return err
	}
	if err := nodepool.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := template.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		return err
	}
	sandboxes := sandbox.NewReconciler(mgr)
	sandboxes.EgressGateImage = opts.EgressGateImage
	sandboxes.EgressGateway = opts.EgressGateway
	if err := sandboxes.SetupWithManager(mgr); err != nil {
		return err
	}
	pools := warmpool.NewReconciler(mgr)
	pools.EgressGateImage = opts.EgressGateImage
	pools.EgressGateway = opts.EgressGateway
	if err := pools.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := gitsync.NewReconciler(mgr, opts.Namespace).SetupWithManager(mgr); err != nil {
		return err
	}
	return sandbox.RegisterPhaseMetric(mgr)
}

// registerInformers registers an informer for every kind of CacheOptions
// before mgr starts, so that its cache is synced, and /readyz answers ok,
// only once all of them are filled. Left to the controllers, a watch would
// be registered as its controller starts, after the cache has said it is
// synced, and a kind first read by a pass (the NetworkPolicies,
// ResourceQuotas and LimitRanges a sandbox's first pass compares with what
// it applies) only then: that pass would wait while every object of the
// kind is listed, at 10,000 sandboxes 10,000 of each.
func registerInformers(mgr ctrl.Manager) error {
	for obj := range CacheOptions().ByObject {
		// Before the cache starts this returns at once.
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return fmt.Errorf("failed to register the informer of %T: %w", obj, err)
		}
	}
	return nil
}
