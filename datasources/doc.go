// Package datasources are the provider's Terraform data sources, one file
// each: which agentsandbox.dev kind it reads. The machinery they share is
// provider/engine.
package datasources

import "github.com/hashicorp/terraform-plugin-framework/datasource"

// All are the data sources.
func All() []func() datasource.DataSource {
	return []func() datasource.DataSource{Template, WarmPool, Sandbox, Sandboxes}
}
