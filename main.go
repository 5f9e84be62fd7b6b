// Command terraform-provider-agentsandbox serves the agentsandbox Terraform
// provider to Terraform or OpenTofu over the plugin protocol.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/version"
	"github.com/agentsandbox/terraform-provider-agentsandbox/provider"
)

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version.Version), providerserver.ServeOpts{
		Address: provider.Address,
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
