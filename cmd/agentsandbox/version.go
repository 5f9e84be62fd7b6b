package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and API version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "agentsandbox %s (commit %s, %s, API %s)\n",
				version.Version, version.Commit(), runtime.Version(), v1.GroupVersion)
			return err
		},
	}
}
