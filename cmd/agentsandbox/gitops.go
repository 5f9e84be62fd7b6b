package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/source"
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
	var scope pruneFlags
	cmd := &cobra.Command{
		Use:   "diff --path DIR | --git URL [--branch B|--tag T|--commit C] [--path P] [--gitsync NAME | --name NAME]",
		Short: "Show what a GitSync of DIR would create, change and prune on the cluster",
		Long: `Reads the declarations below DIR as a GitSync does (strictly), validates them
with a server-side dry run, and prints the objects a sync would create (+) and
the fields it would change (~). With --git, DIR is --path inside a clone of the
repository (credentials: see below).

Pruning needs to know what earlier syncs applied, which a directory does not:
--gitsync NAME compares against the GitSync NAME on the cluster. The
declarations are then labelled as that GitSync labels them, and the objects its
status.inventory lists that DIR no longer declares are printed (-) when its
next sync would delete them: still on the cluster, labelled
agentsandbox.dev/gitsync=NAME, not annotated agentsandbox.dev/prune: disabled,
and spec.prune not false. --name NAME shows what "sync --once --name NAME"
would prune: the objects labelled agentsandbox.dev/gitsync=NAME that DIR no
longer declares. With neither, nothing is shown as pruned.

Exit status: 0 no change, 1 changes (prunes included), 2 error.
` + gitCredentialsHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			a, decls, err := load(ctx, src)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			prune, err := scope.resolve(ctx, a, decls)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			preview, err := prune.sync(a, decls).Preview(ctx)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if printChanges(cmd.OutOrStdout(), preview, prune.why) {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	src.addFlags(cmd)
	cmd.Flags().StringVar(&scope.gitSync, "gitsync", "", "compare with the GitSync of this name on the cluster: its ownership label and the objects its next sync would prune")
	cmd.Flags().StringVar(&scope.name, "name", "", `show what "sync --once --name NAME" would label and prune`)
	cmd.MarkFlagsMutuallyExclusive("gitsync", "name")
	return cmd
}

func newSyncCommand() *cobra.Command {
	var src gitOpsSource
	var scope pruneFlags
	var once bool
	var gitSync string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "sync --once --path DIR | --git URL [--branch B|--tag T|--commit C] [--path P] [--name NAME]\n  agentsandbox sync --gitsync NAME [--timeout 5m]",
		Short: "Apply the declarations of DIR once, as a GitSync would, or have a GitSync sync now",
		Long: `With --once, reads, validates and applies the declarations below DIR with the
GitSync's field manager and stages, for pipelines. Nothing is applied unless
every declaration is valid.

Without --name nothing is pruned: a directory does not know what earlier syncs
applied. With --name NAME every object applied is labelled
agentsandbox.dev/gitsync=NAME, and the label is the inventory: after the
apply, the objects labelled so that DIR no longer declares are deleted (in
reverse stage order, except those annotated agentsandbox.dev/prune: disabled),
as kubectl apply --prune -l does. A reference to an object about to be pruned
is refused before anything is applied. NAME must not be a GitSync's on the
cluster, whose objects carry the same label.

With --gitsync NAME, asks the GitSync NAME on the cluster to sync now (the
agentsandbox.dev/reconcile-requested-at annotation), prints its progress on
stderr and waits for the outcome: exit 0 and the revision applied, or exit 1
and why the sync failed. A pipeline runs it after pushing to the repository.
` + gitCredentialsHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if gitSync != "" {
				if once || src.path != "" || src.url != "" || scope.name != "" {
					return errors.New("--gitsync has the GitSync sync its own repository: it takes no --once, --path, --git or --name")
				}
				return syncNow(cmd, src.conn, gitSync, timeout)
			}
			if !once {
				return errors.New("use --once to apply a directory or repository now, or --gitsync NAME to have a GitSync on the cluster sync now")
			}
			a, decls, err := load(ctx, src)
			if err != nil {
				return err
			}
			prune, err := scope.resolve(ctx, a, decls)
			if err != nil {
				return err
			}
			res, err := prune.sync(a, decls).Run(ctx)
			printEntries(cmd.OutOrStdout(), res.Changes)
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&once, "once", false, "apply once and exit")
	f.StringVar(&scope.name, "name", "", "label what this sync applies agentsandbox.dev/gitsync=NAME, and prune what is labelled so and no longer declared")
	f.StringVar(&gitSync, "gitsync", "", "have the GitSync of this name on the cluster sync now, and wait for the outcome")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "with --gitsync: how long to wait for the sync")
	src.addFlags(cmd)
	return cmd
}

// printEntries prints what an apply or prune did, one object a line.
func printEntries(w io.Writer, changes *ssa.ChangeSet) {
	if changes == nil {
		return
	}
	for _, e := range changes.Entries {
		fmt.Fprintf(w, "%s %s\n", e.Subject, e.Action)
	}
}

// pruneFlags say what diff compares with, and what sync --once prunes.
type pruneFlags struct {
	gitSync, name string
}

// pruneScope is what a sync prunes: the objects of previous still labelled
// as owner's that the declarations no longer have. An empty owner prunes
// nothing.
type pruneScope struct {
	owner    string
	previous []v1.InventoryEntry
	// why ends a pruned object's line in diff's output.
	why string
}

// resolve reads what the flags name, labels decls as their owner's and
// returns what a sync of decls would prune from.
func (f pruneFlags) resolve(ctx context.Context, a *applier.Applier, decls []declarations.Declaration) (pruneScope, error) {
	switch {
	case f.gitSync != "":
		gs, err := readGitSync(ctx, a.Client(), f.gitSync)
		if err != nil {
			return pruneScope{}, err
		}
		applier.SetOwner(decls, gs.Name)
		if !gs.Spec.PruneOrDefault() {
			return pruneScope{}, nil
		}
		return pruneScope{owner: gs.Name, previous: gs.Status.Inventory, why: "in the inventory of GitSync " + gs.Name + ", no longer declared"}, nil
	case f.name != "":
		if err := validation.IsValidLabelValue(f.name); len(err) > 0 {
			return pruneScope{}, fmt.Errorf("--name %q: %s", f.name, strings.Join(err, "; "))
		}
		err := a.Client().Get(ctx, client.ObjectKey{Name: f.name}, &v1.GitSync{})
		switch {
		case err == nil:
			return pruneScope{}, fmt.Errorf("--name %s: a GitSync of that name is on the cluster, and its objects are labelled %s=%s too; choose another name", f.name, v1.LabelGitSync, f.name)
		case !apierrors.IsNotFound(err):
			return pruneScope{}, fmt.Errorf("--name %s: failed to check for a GitSync of that name: %w", f.name, err)
		}
		previous, err := a.Labelled(ctx, f.name)
		if err != nil {
			return pruneScope{}, err
		}
		applier.SetOwner(decls, f.name)
		return pruneScope{owner: f.name, previous: previous, why: "labelled " + v1.LabelGitSync + "=" + f.name + ", no longer declared"}, nil
	}
	return pruneScope{}, nil
}

// sync is the sync of decls that prunes what p names.
func (p pruneScope) sync(a *applier.Applier, decls []declarations.Declaration) gitops.Sync {
	return gitops.Sync{Applier: a, Declarations: decls, Previous: p.previous, PruneOwner: p.owner}
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

// gitOpsSource is where diff and sync read declarations: a local directory,
// or a path in a Git repository.
type gitOpsSource struct {
	path, url string
	ref       v1.GitRef
	creds     gitCredentials
	// conn is the cluster the declarations are compared with or applied to.
	conn clientFlags
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
	s.conn.register(cmd)
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
		if info, err := os.Stat(s.path); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("--path %s: no such directory", s.path)
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
	return declarations.ReadDir(dir, (&v1.GitSyncSpec{Path: s.path}).PathOrDefault())
}

// load reads the declarations and returns an applier on the cluster of
// the kubeconfig, acting as --as when given.
func load(ctx context.Context, src gitOpsSource) (*applier.Applier, []declarations.Declaration, error) {
	decls, err := src.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	c, err := src.conn.kubeClient()
	if err != nil {
		return nil, nil, err
	}
	return applier.New(c), decls, nil
}

// printChanges lists creations, field changes and prunes; true when there
// are any.
func printChanges(w io.Writer, preview gitops.Preview, why string) bool {
	changed := false
	for _, c := range preview.Changes {
		obj := c.Declaration.Object
		switch c.Action {
		case ssa.CreatedAction:
			fmt.Fprintf(w, "+ %s/%s (%s): created\n", obj.GetKind(), obj.GetName(), c.Declaration.Where())
		case ssa.ConfiguredAction:
			adopted := ""
			if c.Adopted {
				adopted = ", adopted: it exists without this GitSync's label (made outside Git, or by another GitSync)"
			}
			fmt.Fprintf(w, "~ %s/%s (%s): changed%s\n", obj.GetKind(), obj.GetName(), c.Declaration.Where(), adopted)
			for _, f := range c.Fields {
				fmt.Fprintf(w, "    %s\n", f)
			}
		default:
			continue
		}
		changed = true
	}
	for _, obj := range preview.Pruned {
		fmt.Fprintf(w, "- %s/%s: pruned (%s)\n", obj.GetKind(), obj.GetName(), why)
		changed = true
	}
	if !changed {
		fmt.Fprintln(w, "no changes")
	}
	return changed
}
