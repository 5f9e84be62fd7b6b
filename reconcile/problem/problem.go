// Package problem is the one shape in which every controller of this API
// says why an object is not Ready: a reason of the Ready condition, a message
// phrased for the person who has to act, and whether retrying can help.
// Keeping one type keeps the conditions of every kind alike, which is what
// `kubectl wait`, Flux's health checks, the provider's waits and the page
// read.
package problem

import (
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// Problem is why an object cannot be Ready.
type Problem struct {
	// Reason is the Ready condition's reason, one of the api's Reason
	// constants.
	Reason string
	// Message says what is wrong and what would fix it.
	Message string
	// Stalled problems need a change elsewhere (a spec, another object);
	// the others resolve themselves as the cluster catches up, so the
	// controller retries them.
	Stalled bool
	// Unwatched marks a stalled problem whose cause the controller does
	// not watch (a namespace that is not the reconciler's is not in its
	// cache), so nothing would wake it when the cause goes: it looks again
	// now and then.
	Unwatched bool
}

// New is a problem that retrying can resolve.
func New(reason, format string, args ...any) *Problem {
	return &Problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Stall is a problem that only a change elsewhere resolves.
func Stall(reason, format string, args ...any) *Problem {
	return &Problem{Reason: reason, Message: fmt.Sprintf(format, args...), Stalled: true}
}

// Error makes a problem usable where an error is expected, such as a
// terminal error that stops controller-runtime's retries.
func (p *Problem) Error() string { return p.Message }

// Mark records the problem on obj: Ready False with its reason and
// message, and Stalled set for a stalled problem and removed otherwise.
// Reconciling is the controller's to decide, since whether a retry is
// progress differs by kind.
func (p *Problem) Mark(obj conditions.Setter) {
	conditions.MarkFalse(obj, v1.ReadyCondition, p.Reason, "%s", p.Message)
	if p.Stalled {
		conditions.MarkStalled(obj, p.Reason, "%s", p.Message)
	} else {
		conditions.Delete(obj, v1.StalledCondition)
	}
}
