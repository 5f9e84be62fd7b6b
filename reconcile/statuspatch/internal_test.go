package statuspatch

import (
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// statusOf reads the field Status by reflection, which panics on a kind
// without one: every kind the controllers write must give its own status
// type, the one a write compares.
func TestStatusOfEveryKind(t *testing.T) {
	for obj, want := range map[client.Object]any{
		&v1.NodePool{}:        v1.NodePoolStatus{},
		&v1.SandboxTemplate{}: v1.SandboxTemplateStatus{},
		&v1.Sandbox{}:         v1.SandboxStatus{},
		&v1.WarmPool{}:        v1.WarmPoolStatus{},
		&v1.GitSync{}:         v1.GitSyncStatus{},
	} {
		if got := statusOf(obj); fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
			t.Errorf("statusOf(%T) is a %T, want %T", obj, got, want)
		}
	}
}
