package provider

import (
	"fmt"
	"os"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// envLookup reads the KUBE_* fallbacks; a variable so tests can pass their
// own environment.
var envLookup = os.Getenv

// Clients is what Configure hands to resources and data sources: the
// connection settings and, once the first operation asks for it, one client
// reused for the rest of the run.
type Clients struct {
	settings connectionSettings
	// FieldManager names the provider's server-side apply writes.
	FieldManager string

	once   sync.Once
	client client.Client
	err    error
}

func newClients(s connectionSettings, fieldManager string) *Clients {
	return &Clients{settings: s, FieldManager: fieldManager}
}

// Client returns the shared client, building it on first use. A failure is
// remembered: every operation of the run reports the same clear error.
func (c *Clients) Client() (client.Client, error) {
	c.once.Do(func() {
		var cfg *rest.Config
		if cfg, c.err = c.settings.restConfig(); c.err != nil {
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
