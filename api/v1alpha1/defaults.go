package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

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
