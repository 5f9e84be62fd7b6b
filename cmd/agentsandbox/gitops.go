package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fluxcd/pkg/ssa"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
)

// exitError ends the process with a code other than 1: diff tells "no
// change" (0), "changes" (1) and "error" (2) apart, as diff(1) does.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func newDiffCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "diff --path DIR",
		Short: "Show what a GitSync of DIR would create and change on the cluster",
		Long: `Reads the declarations below DIR as a GitSync does (strictly), validates them
with a server-side dry run, and prints the objects a sync would create and the
fields it would change. Exit status: 0 no change, 1 changes, 2 error.
Pruning is not shown: a directory has no inventory of earlier syncs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, decls, err := loadValidated(cmd.Context(), path)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			changes, err := a.Diff(cmd.Context(), decls)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if printChanges(cmd.OutOrStdout(), changes) {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	addGitOpsFlags(cmd, &path)
	return cmd
}

func newSyncCommand() *cobra.Command {
	var path string
	var once bool
	cmd := &cobra.Command{
		Use:   "sync --once --path DIR",
		Short: "Apply the declarations of DIR once, as a GitSync would, for pipelines",
		Long: `Reads, validates and applies the declarations below DIR with the GitSync's
field manager and stages. Nothing is applied unless every declaration is
valid. Nothing is pruned: a directory has no inventory of earlier syncs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once {
				return errors.New("only --once is supported: a continuous sync is a GitSync in the cluster")
			}
			a, decls, err := loadValidated(cmd.Context(), path)
			if err != nil {
				return err
			}
			changes, err := a.Apply(cmd.Context(), decls)
			if changes != nil {
				for _, e := range changes.Entries {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", e.Subject, e.Action)
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "apply once and exit")
	addGitOpsFlags(cmd, &path)
	return cmd
}

func addGitOpsFlags(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "path", "", "directory of the declarations (required)")
	_ = cmd.MarkFlagRequired("path")
	goFlags := goflagSet()
	ctrlconfig.RegisterFlags(goFlags) // --kubeconfig
	cmd.Flags().AddGoFlagSet(goFlags)
}

// loadValidated reads the directory and validates it against the cluster
// exactly as a GitSync sync does before it applies.
func loadValidated(ctx context.Context, path string) (*applier.Applier, []declarations.Declaration, error) {
	decls, err := declarations.ReadDir(path, ".")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("failed to load cluster credentials: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: reconcile.Scheme})
	if err != nil {
		return nil, nil, err
	}
	a := applier.New(c)
	if err := a.Validate(ctx, decls); err != nil {
		return nil, nil, err
	}
	if err := a.CheckReferences(ctx, decls, nil); err != nil {
		return nil, nil, err
	}
	return a, decls, nil
}

// printChanges lists creations and field changes; true when there are any.
func printChanges(w io.Writer, changes []applier.Change) bool {
	changed := false
	for _, c := range changes {
		obj := c.Declaration.Object
		switch c.Action {
		case ssa.CreatedAction:
			fmt.Fprintf(w, "+ %s/%s (%s): created\n", obj.GetKind(), obj.GetName(), c.Declaration.Where())
		case ssa.ConfiguredAction:
			fmt.Fprintf(w, "~ %s/%s (%s): changed\n", obj.GetKind(), obj.GetName(), c.Declaration.Where())
			for _, f := range c.Fields {
				fmt.Fprintf(w, "    %s\n", f)
			}
		default:
			continue
		}
		changed = true
	}
	if !changed {
		fmt.Fprintln(w, "no changes")
	}
	return changed
}
