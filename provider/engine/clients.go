package engine

import (
	"fmt"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// Clients is what Configure hands to resources and data sources: the
// connection settings and, once the first operation asks for it, one client
// reused for the rest of the run.
type Clients struct {
	restConfig func() (*rest.Config, error)
	// FieldManager names the provider's server-side apply writes.
	FieldManager string

	once   sync.Once
	client client.Client
	err    error
}

// NewClients builds the client from restConfig when an operation first
// needs it, and names its writes fieldManager.
func NewClients(restConfig func() (*rest.Config, error), fieldManager string) *Clients {
	return &Clients{restConfig: restConfig, FieldManager: fieldManager}
}

// Client returns the shared client, building it on first use. A failure is
// remembered: every operation of the run reports the same clear error.
func (c *Clients) Client() (client.Client, error) {
	c.once.Do(func() {
		var cfg *rest.Config
		if cfg, c.err = c.restConfig(); c.err != nil {
			return
		}
		cfg.UserAgent = "terraform-provider-agentsandbox"
		// client-go's default of 5 requests a second would make a refresh
		// of a few hundred resources take a minute; the API server's
		// priority and fairness protects it from a burst of this size.
		cfg.QPS, cfg.Burst = 100, 200
		if c.client, c.err = client.New(cfg, client.Options{Scheme: kubescheme.Scheme}); c.err != nil {
			c.err = fmt.Errorf("failed to create the Kubernetes client: %w", c.err)
		}
	})
	return c.client, c.err
}
