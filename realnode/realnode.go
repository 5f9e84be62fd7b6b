// Package realnode names the real node hack/node.sh joins to the local
// cluster, for the tests and benchmarks that run sandboxes on it. Its
// tests prove what kwok nodes cannot: that a sandbox made by the
// controllers from a template really runs isolated, under runc and under
// gVisor, with its egress governed by NetworkPolicy.
//
// hack/node.sh reads its values from here (realnode_const, in
// hack/node/common.sh): this file is the one place they are kept. Keep each
// a one-line string or number constant, which is all the script's reader
// understands.
package realnode

const (
	// NodeName is the real node's name.
	NodeName = "agentsandbox-node"
	// NodeIP is its address: the bridge its pods hang off, where the
	// kubelet serves.
	NodeIP = "10.244.0.1"
	// Bridge is the bridge its pods hang off.
	Bridge = "asbr0"
	// PodCIDR is the range its pods get addresses from.
	PodCIDR = "10.244.0.0/24"
	// GroupLabel is the label a node pool's selector selects it by.
	GroupLabel = "agentsandbox.dev/node-group"
	// Group is its value of GroupLabel.
	Group = "real"
	// TaintKey is its taint (value "true", NoSchedule): only pools that
	// name it land there.
	TaintKey = "agentsandbox.dev/real-node"
	// StorageClass holds its local volumes, for persistent workspaces.
	StorageClass = "agentsandbox-node-local"
	// SmallVolume is the capacity of its smallest local volumes, each a
	// file system of that size: a workspace of SmallVolume is full there.
	SmallVolume = "64Mi"
	// PodPidsLimit is how many processes and threads a pod may have.
	PodPidsLimit = 1024
	// PythonImage is the Debian image with python3 built for it.
	PythonImage = "localhost/agentsandbox/python:3.11"
	// GateImage is the image of cmd/sandbox-gate built for it, which the
	// controllers of its tests (and make demo's) start every pod with.
	GateImage = "localhost/agentsandbox/sandbox-gate:dev"
	// RuncHandler is its containerd runtime handler for runc.
	RuncHandler = "runc"
	// GVisorHandler is its containerd runtime handler for gVisor.
	GVisorHandler = "runsc"
	// RequiredEnv names the variable that, set to "true" (make test does
	// once the node is up), turns a missing node from a skip into a
	// failure.
	RequiredEnv = "AGENTSANDBOX_REAL_NODE"
)
