// Command agentsandbox runs the reconciler (`agentsandbox reconcile`) and,
// as later commands land, the everyday sandbox commands.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "agentsandbox",
		Short:         "Run AI-agent code in isolated sandboxes on your own Kubernetes cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newReconcileCommand())
	return root
}

// goflagSet returns an empty standard-library flag set, for libraries (zap,
// controller-runtime's --kubeconfig) that register their flags there.
func goflagSet() *flag.FlagSet { return flag.NewFlagSet("agentsandbox", flag.ContinueOnError) }
