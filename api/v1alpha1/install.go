package v1alpha1

// Names an installation from config/ creates. They live beside the types so
// that the reconciler, which takes them, and the clients that check an
// installation (the Sandboxes page) look in the same places.
const (
	// SystemNamespace holds the reconciler, its leader election Lease, the
	// admission ConfigMap and the GitSync credentials Secrets.
	SystemNamespace = "agentsandbox-system"
	// ReconcilerLease is the Lease the reconciler's replicas elect a leader
	// with: its holder is the active reconciler, and a renew time older than
	// its duration means none is running.
	ReconcilerLease = "agentsandbox-reconciler"
)
