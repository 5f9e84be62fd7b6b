package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults of a template's workspace (the CRD's, which a test holds these
// to). The API server fills them into every stored template; code that reads
// a template it did not get from the API server (a declaration, a plan, an
// older object) reads them through the accessors below.
const (
	DefaultWorkspaceSize      = "1Gi"
	DefaultWorkspaceMountPath = "/workspace"
)

// SizeOrDefault is the workspace's size: the volume's request when
// persistent, the emptyDir's limit otherwise.
func (in *Workspace) SizeOrDefault() resource.Quantity {
	if in.Size != nil {
		return *in.Size
	}
	return resource.MustParse(DefaultWorkspaceSize)
}

// MountPathOrDefault is where the workspace is mounted in the sandbox.
func (in *Workspace) MountPathOrDefault() string {
	if in.MountPath == "" {
		return DefaultWorkspaceMountPath
	}
	return in.MountPath
}

// DefaultEphemeralStorage is the ephemeral-storage limit of a sandbox
// whose template sets none, beside its workspace when that is ephemeral
// (an emptyDir, which counts toward the same limit). Without a limit,
// code under runc could fill the node's disk through its root file
// system; past it, the kubelet evicts the pod and the sandbox starts
// again. (Under gVisor the root file system's writes are kept in memory,
// within the memory limit.)
const DefaultEphemeralStorage = "10Gi"

// DefaultMemoryLimit is the memory limit of a sandbox whose template sets
// resources but no memory limit (the CRD's default limit, which applies
// only where resources are left out whole), unless its request is more.
// Without one, its code could take the node's memory from every other
// sandbox there.
const DefaultMemoryLimit = "1Gi"

// DefaultClusterDNS is a template's network.clusterDNS when it sets none
// (the CRD's default): off, since the cluster resolver forwards any name,
// and a name can carry data out past every egress rule.
const DefaultClusterDNS = false

// AllowsClusterDNS tells whether the sandboxes may query the cluster
// resolver.
func (in *Network) AllowsClusterDNS() bool {
	if in.ClusterDNS == nil {
		return DefaultClusterDNS
	}
	return *in.ClusterDNS
}

// Defaults of a GitSync (the CRD's, which a test holds these to), for the
// same readers: `agentsandbox sync --once` and `diff` read a GitSync spec
// from flags, and a stored one from before a default existed lacks it.
const (
	DefaultGitSyncPath     = "./"
	DefaultGitSyncInterval = 5 * time.Minute
	DefaultGitSyncTimeout  = 2 * time.Minute
	DefaultGitSyncPrune    = true
)

// PathOrDefault is the directory of the repository the declarations are
// read from.
func (in *GitSyncSpec) PathOrDefault() string {
	if in.Path == "" {
		return DefaultGitSyncPath
	}
	return in.Path
}

// IntervalOrDefault is the time between syncs.
func (in *GitSyncSpec) IntervalOrDefault() time.Duration {
	if in.Interval.Duration <= 0 {
		return DefaultGitSyncInterval
	}
	return in.Interval.Duration
}

// TimeoutOrDefault bounds one sync.
func (in *GitSyncSpec) TimeoutOrDefault() time.Duration {
	if in.Timeout.Duration <= 0 {
		return DefaultGitSyncTimeout
	}
	return in.Timeout.Duration
}

// PruneOrDefault tells whether objects a revision no longer declares are
// deleted.
func (in *GitSyncSpec) PruneOrDefault() bool {
	if in.Prune == nil {
		return DefaultGitSyncPrune
	}
	return *in.Prune
}
