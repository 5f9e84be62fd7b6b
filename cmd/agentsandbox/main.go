// Command agentsandbox runs the reconciler (`agentsandbox reconcile`), the
// GitOps commands for pipelines (diff, sync) and the everyday sandbox
// commands (claim, exec, run, cp, port-forward, ...), which are built on the
// sandboxclient package.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		code := 1
		var exit *exitError
		if errors.As(err, &exit) {
			code = exit.code
		}
		if err.Error() != "" {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
		os.Exit(code)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "agentsandbox",
		Short:         "Run AI-agent code in isolated sandboxes on your own Kubernetes cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newReconcileCommand(), newDiffCommand(), newSyncCommand(),
		newSuspendCommand(true), newSuspendCommand(false),
		newClaimCommand(), newListCommand(), newGetCommand(), newExecCommand(), newAttachCommand(), newPsCommand(),
		newRunCommand(), newCpCommand(),
		newPortForwardCommand(), newLogsCommand(), newStateCommand(v1.SandboxStopped),
		newStateCommand(v1.SandboxRunning), newDeleteCommand(), newMCPCommand(),
		newSSHProxyCommand(), newSSHConfigCommand(), newUICommand(), newCheckCommand())
	return root
}

// goflagSet returns an empty standard-library flag set, for libraries (zap,
// controller-runtime's --kubeconfig) that register their flags there.
func goflagSet() *flag.FlagSet { return flag.NewFlagSet("agentsandbox", flag.ContinueOnError) }
