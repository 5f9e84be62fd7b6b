package reconcile

import (
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

// SetupControllers registers every controller of the reconciler with mgr.
func SetupControllers(mgr ctrl.Manager, opts Options) error {
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
