package warmpool

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewWithClient is a Reconciler that reads and writes through c, for tests
// of one step without a manager.
func NewWithClient(c client.Client) *Reconciler {
	return &Reconciler{Client: c, apiReader: c, memory: newMemory()}
}

// CreateAll exposes createAll to the package's external tests.
func (r *Reconciler) CreateAll(ctx context.Context, objs []client.Object) error {
	return r.createAll(ctx, objs)
}
