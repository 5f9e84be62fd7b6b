package reconcile

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/gitsync"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/nodepool"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/sandbox"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/template"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/warmpool"
)

// SetupControllers registers every controller of the reconciler with mgr.
func SetupControllers(mgr ctrl.Manager) error {
	if err := nodepool.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := template.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := sandbox.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := warmpool.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := gitsync.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		return err
	}
	return sandbox.RegisterPhaseMetric(mgr)
}
