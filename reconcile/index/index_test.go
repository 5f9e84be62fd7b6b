package index

import (
	"testing"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// TestIndexNamesAreReferences: every index name the controllers look up is
// a reference Register indexes, on the kind the name says.
func TestIndexNamesAreReferences(t *testing.T) {
	for name, on := range map[string]struct{ field, from, to string }{
		"SandboxTemplate":  {SandboxTemplate, v1.KindSandbox, v1.KindSandboxTemplate},
		"SandboxWarmPool":  {SandboxWarmPool, v1.KindSandbox, v1.KindWarmPool},
		"WarmPoolTemplate": {WarmPoolTemplate, v1.KindWarmPool, v1.KindSandboxTemplate},
		"TemplateNodePool": {TemplateNodePool, v1.KindSandboxTemplate, v1.KindNodePool},
	} {
		found := false
		for _, ref := range v1.References {
			found = found || ref.Field == on.field && ref.From == on.from && ref.To == on.to
		}
		if !found {
			t.Errorf("index %s (%s on %s, naming a %s) is not in v1alpha1.References", name, on.field, on.from, on.to)
		}
	}
}
