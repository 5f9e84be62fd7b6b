package environment

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// ReadyTemplate returns the template named and its node pool (nil for the
// default runtime) when the template controller has found the template's
// current spec valid; otherwise the problem that keeps an environment from
// being built from it. referrer says who names the template ("spec.templateRef",
// "WarmPool \"python\"'s spec.templateRef"), for the message.
func ReadyTemplate(ctx context.Context, c client.Reader, referrer, name string) (*v1.SandboxTemplate, *v1.NodePool, *problem.Problem, error) {
	tpl := &v1.SandboxTemplate{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, problem.New(v1.ReasonTemplateNotFound,
				"%s names SandboxTemplate %q, which does not exist; create it or fix the reference", referrer, name), nil
		}
		return nil, nil, nil, fmt.Errorf("failed to get SandboxTemplate %s: %w", name, err)
	}
	if r := tpl.Readiness(); !r.Ready {
		return nil, nil, problem.New(v1.ReasonTemplateNotReady, "SandboxTemplate %q is not Ready: %s", name, r.Message), nil
	}
	var nodePool *v1.NodePool
	if ref := tpl.Spec.NodePoolRef; ref != nil {
		nodePool = &v1.NodePool{}
		if err := c.Get(ctx, types.NamespacedName{Name: ref.Name}, nodePool); err != nil {
			return nil, nil, nil, fmt.Errorf("failed to get NodePool %s: %w", ref.Name, err)
		}
	}
	return tpl, nodePool, nil, nil
}
