// Package resources are the provider's Terraform resource types, one file
// each: which agentsandbox.dev kind it manages, how it waits for the object
// to be ready and how that is documented. The machinery they share (schema
// from the CRD, server-side apply, waits) is provider/engine; the
// acceptance test of each type sits beside it.
package resources

import (
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// All are the resource types, in dependency order.
func All() []func() resource.Resource {
	return []func() resource.Resource{NodePool, Template, WarmPool, Sandbox, GitSync}
}

// Ephemeral are the ephemeral resource types.
func Ephemeral() []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{EphemeralSandbox}
}
