package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fluxcd/pkg/ssa"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/source"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
)

// exitError ends the process with a given code, printing err when there is
// one: diff tells "no change" (0), "changes" (1) and "error" (2) apart, as
// diff(1) does, and exec and run pass on the command's own code (it has said
// what it had to on its stderr).
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
	var src gitOpsSource
	cmd := &cobra.Command{
		Use:   "diff --path DIR | --git URL [--branch B|--tag T|--commit C] [--path P]",
		Short: "Show what a GitSync of DIR would create and change on the cluster",
		Long: `Reads the declarations below DIR as a GitSync does (strictly), validates them
with a server-side dry run, and prints the objects a sync would create and the
fields it would change. With --git, DIR is --path inside a clone of the
repository (public, or reachable without credentials). Exit status: 0 no
change, 1 changes, 2 error.
Pruning is not shown: a directory has no inventory of earlier syncs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, decls, err := loadValidated(cmd.Context(), src)
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
	src.addFlags(cmd)
	return cmd
}

func newSyncCommand() *cobra.Command {
	var src gitOpsSource
	var once bool
	cmd := &cobra.Command{
		Use:   "sync --once --path DIR | --git URL [--branch B|--tag T|--commit C] [--path P]",
		Short: "Apply the declarations of DIR once, as a GitSync would, for pipelines",
		Long: `Reads, validates and applies the declarations below DIR with the GitSync's
field manager and stages. Nothing is applied unless every declaration is
valid. Nothing is pruned: a directory has no inventory of earlier syncs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once {
				return errors.New("only --once is supported: a continuous sync is a GitSync in the cluster")
			}
			a, decls, err := loadValidated(cmd.Context(), src)
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
	src.addFlags(cmd)
	return cmd
}

// gitOpsSource is where diff and sync read declarations: a local directory,
// or a path in a Git repository.
type gitOpsSource struct {
	path, url string
	ref       v1.GitRef
}

func (s *gitOpsSource) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.path, "path", "", "directory of the declarations; with --git, the path inside the repository")
	f.StringVar(&s.url, "git", "", "URL of a Git repository to read the declarations from")
	f.StringVar(&s.ref.Branch, "branch", "", "with --git: the branch (default main)")
	f.StringVar(&s.ref.Tag, "tag", "", "with --git: the tag")
	f.StringVar(&s.ref.Commit, "commit", "", "with --git: the commit")
	cmd.MarkFlagsMutuallyExclusive("branch", "tag", "commit")
	goFlags := goflagSet()
	ctrlconfig.RegisterFlags(goFlags) // --kubeconfig
	f.AddGoFlagSet(goFlags)
}

// read returns the declarations, cloning the repository first with --git.
func (s gitOpsSource) read(ctx context.Context) ([]declarations.Declaration, error) {
	if s.url == "" {
		if s.path == "" {
			return nil, errors.New("set --path DIR, or --git URL")
		}
		return declarations.ReadDir(s.path, ".")
	}
	parent, err := os.MkdirTemp("", "agentsandbox-git-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(parent)
	dir, _, err := source.Fetch(ctx, s.url, s.ref, nil, parent)
	if err != nil {
		return nil, err
	}
	path := s.path
	if path == "" {
		path = "./"
	}
	return declarations.ReadDir(dir, path)
}

// loadValidated reads the declarations and validates them against the
// cluster exactly as a GitSync sync does before it applies.
func loadValidated(ctx context.Context, src gitOpsSource) (*applier.Applier, []declarations.Declaration, error) {
	decls, err := src.read(ctx)
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
