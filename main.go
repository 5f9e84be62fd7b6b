// Command terraform-provider-agentsandbox serves the agentsandbox Terraform
// provider to Terraform or OpenTofu over the plugin protocol.
package main

import (
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/version"
	"github.com/agentsandbox/terraform-provider-agentsandbox/provider"
)

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve")
	flag.Parse()
	srv, err := provider.Server(version.Version)()
	if err != nil {
		log.Fatal(err)
	}
	var opts []tf6server.ServeOpt
	if *debug {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	err = tf6server.Serve(provider.Address, func() tfprotov6.ProviderServer { return srv }, opts...)
	if err != nil {
		log.Fatal(err)
	}
}
