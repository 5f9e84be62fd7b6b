package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fluxcd/pkg/ssa"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	var gitSync string
	cmd := &cobra.Command{
		Use:   "diff --path DIR | --git URL [--branch B|--tag T|--commit C] [--path P] [--gitsync NAME]",
		Short: "Show what a GitSync of DIR would create, change and prune on the cluster",
		Long: `Reads the declarations below DIR as a GitSync does (strictly), validates them
with a server-side dry run, and prints the objects a sync would create (+) and
the fields it would change (~). With --git, DIR is --path inside a clone of the
repository (credentials: see below).

Pruning needs the inventory of earlier syncs, which a directory does not have:
--gitsync NAME compares against the GitSync NAME on the cluster instead. The
declarations are then labelled as that GitSync labels them, and the objects its
status.inventory lists that DIR no longer declares are printed (-) when its
next sync would delete them: still on the cluster, labelled
agentsandbox.dev/gitsync=NAME, not annotated agentsandbox.dev/prune: disabled,
and spec.prune not false. Without --gitsync nothing is shown as pruned.

Exit status: 0 no change, 1 changes (prunes included), 2 error.
` + gitCredentialsHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			a, decls, err := load(ctx, src)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			var previous *v1.GitSync
			if gitSync != "" {
				if previous, err = readGitSync(ctx, a.Client(), gitSync); err != nil {
					return &exitError{code: 2, err: err}
				}
				applier.SetOwner(decls, gitSync)
			}
			changes, err := a.Validate(ctx, decls, nil, true)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			pruned, err := wouldPrune(ctx, a, decls, previous)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if printChanges(cmd.OutOrStdout(), changes, pruned, gitSync) {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	src.addFlags(cmd)
	cmd.Flags().StringVar(&gitSync, "gitsync", "", "compare with the GitSync of this name on the cluster: its ownership label and the objects its next sync would prune")
	return cmd
}

// readGitSync reads the GitSync --gitsync names.
func readGitSync(ctx context.Context, c client.Client, name string) (*v1.GitSync, error) {
	gs := &v1.GitSync{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, gs); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("--gitsync: GitSync %q not found on the cluster", name)
		}
		return nil, fmt.Errorf("--gitsync: failed to read GitSync %q: %w", name, err)
	}
	return gs, nil
}

// wouldPrune checks the references of decls as a sync of previous would
// (an object it is about to prune does not count) and returns the live
// objects that sync would prune; none without previous.
func wouldPrune(ctx context.Context, a *applier.Applier, decls []declarations.Declaration, previous *v1.GitSync) ([]*unstructured.Unstructured, error) {
	if previous == nil || (previous.Spec.Prune != nil && !*previous.Spec.Prune) {
		return nil, a.CheckReferences(ctx, decls, nil)
	}
	current := applier.Inventory(decls)
	if err := a.CheckReferences(ctx, decls, applier.Stale(previous.Status.Inventory, current)); err != nil {
		return nil, err
	}
	return a.WouldPrune(ctx, previous.Status.Inventory, current, previous.Name)
}

func newSyncCommand() *cobra.Command {
	var src gitOpsSource
	var once bool
	cmd := &cobra.Command{
		Use:   "sync --once --path DIR | --git URL [--branch B|--tag T|--commit C] [--path P]",
		Short: "Apply the declarations of DIR once, as a GitSync would, for pipelines",
		Long: `Reads, validates and applies the declarations below DIR with the GitSync's
field manager and stages. Nothing is applied unless every declaration is
valid. Nothing is pruned: a directory has no inventory of earlier syncs.
` + gitCredentialsHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once {
				return errors.New("only --once is supported: a continuous sync is a GitSync in the cluster")
			}
			ctx := cmd.Context()
			a, decls, err := load(ctx, src)
			if err != nil {
				return err
			}
			planned, err := a.Validate(ctx, decls, nil, false)
			if err != nil {
				return err
			}
			if err := a.CheckReferences(ctx, decls, nil); err != nil {
				return err
			}
			changes, err := a.Apply(ctx, planned)
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
	creds     gitCredentials
}

func (s *gitOpsSource) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.path, "path", "", "directory of the declarations; with --git, the path inside the repository")
	f.StringVar(&s.url, "git", "", "URL of a Git repository to read the declarations from")
	f.StringVar(&s.ref.Branch, "branch", "", "with --git: the branch (default main)")
	f.StringVar(&s.ref.Tag, "tag", "", "with --git: the tag")
	f.StringVar(&s.ref.Commit, "commit", "", "with --git: the commit")
	cmd.MarkFlagsMutuallyExclusive("branch", "tag", "commit")
	s.creds.addFlags(cmd)
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
		if s.creds.given() {
			return nil, errors.New("the --git-* credential flags need --git URL")
		}
		return declarations.ReadDir(s.path, ".")
	}
	auth, err := s.creds.auth(s.url)
	if err != nil {
		return nil, err
	}
	parent, err := os.MkdirTemp("", "agentsandbox-git-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(parent)
	dir, _, err := source.Fetch(ctx, s.url, s.ref, auth, parent)
	if err != nil {
		return nil, err
	}
	path := s.path
	if path == "" {
		path = "./"
	}
	return declarations.ReadDir(dir, path)
}

// load reads the declarations and returns an applier on the cluster of
// the kubeconfig.
func load(ctx context.Context, src gitOpsSource) (*applier.Applier, []declarations.Declaration, error) {
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
	return applier.New(c), decls, nil
}

// printChanges lists creations, field changes and prunes; true when there
// are any.
func printChanges(w io.Writer, changes []applier.Change, pruned []*unstructured.Unstructured, gitSync string) bool {
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
	for _, obj := range pruned {
		fmt.Fprintf(w, "- %s/%s: pruned (in the inventory of GitSync %s, no longer declared)\n", obj.GetKind(), obj.GetName(), gitSync)
		changed = true
	}
	if !changed {
		fmt.Fprintln(w, "no changes")
	}
	return changed
}
