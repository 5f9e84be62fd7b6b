package v1alpha1

// Names an installation from config/ creates. They live beside the types so
// that the reconciler, which takes them, and the clients that check an
// installation (the Sandboxes page) look in the same places.
const (
	// SystemNamespace holds the reconciler, its leader election Lease, the
	// admission ConfigMap, the GitSync credentials Secrets, the egress
	// gateway and the Secrets of templates' endpoint credentials.
	SystemNamespace = "agentsandbox-system"
	// ReconcilerLease is the Lease the reconciler's replicas elect a leader
	// with: its holder is the active reconciler, and a renew time older than
	// its duration means none is running.
	ReconcilerLease = "agentsandbox-reconciler"
	// EgressGatewayName names the egress gateway's Deployment, Service and
	// ServiceAccount (config/gateway), in SystemNamespace: the Service is
	// the reconciler's default --egress-gateway.
	EgressGatewayName = "agentsandbox-gateway"
)
