// Package source fetches one revision of a Git repository: it resolves the
// ref with an ls-remote first, so a caller that already holds that revision
// can skip the clone, and clones shallowly when it must.
package source

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// Revision names a commit the way Flux does: "<branch>@sha1:<hash>",
// "<tag>@sha1:<hash>", or "sha1:<hash>" for a pinned commit.
type Revision string

// Resolve asks the remote which commit ref points at, without cloning. A
// pinned commit resolves to itself: Git servers do not list commits.
func Resolve(ctx context.Context, url string, ref v1.GitRef, auth transport.AuthMethod) (Revision, error) {
	if ref.Commit != "" {
		return Revision("sha1:" + ref.Commit), nil
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return "", fmt.Errorf("failed to list refs of %s: %w", url, err)
	}
	name, label := refName(ref)
	var hash, peeled string
	for _, r := range refs {
		switch r.Name().String() {
		case name.String():
			hash = r.Hash().String()
		case name.String() + "^{}":
			// An annotated tag lists the tag object and, peeled, the commit.
			peeled = r.Hash().String()
		}
	}
	if peeled != "" {
		hash = peeled
	}
	if hash == "" {
		return "", fmt.Errorf("%s %q not found in %s", refKind(ref), label, url)
	}
	return Revision(label + "@sha1:" + hash), nil
}

// clone checks out ref into dir, which must not exist yet or be empty, and
// returns the revision checked out. Branches and tags are cloned with depth
// 1; a commit needs the history that contains it, so it is a full clone.
func clone(ctx context.Context, url string, ref v1.GitRef, auth transport.AuthMethod, dir string) (Revision, error) {
	opts := &git.CloneOptions{URL: url, Auth: auth, Tags: git.NoTags, NoCheckout: ref.Commit != ""}
	if ref.Commit == "" {
		name, _ := refName(ref)
		opts.ReferenceName, opts.SingleBranch, opts.Depth = name, true, 1
	}
	repo, err := git.PlainCloneContext(ctx, dir, false, opts)
	if err != nil {
		if errors.Is(err, plumbing.ErrReferenceNotFound) || errors.Is(err, git.NoMatchingRefSpecError{}) {
			_, label := refName(ref)
			return "", fmt.Errorf("%s %q not found in %s", refKind(ref), label, url)
		}
		return "", fmt.Errorf("failed to clone %s: %w", url, err)
	}
	if ref.Commit != "" {
		wt, err := repo.Worktree()
		if err != nil {
			return "", err
		}
		if err := wt.Checkout(&git.CheckoutOptions{Hash: plumbing.NewHash(ref.Commit)}); err != nil {
			return "", fmt.Errorf("failed to check out commit %s of %s: %w", ref.Commit, url, err)
		}
		return Revision("sha1:" + ref.Commit), nil
	}
	head, err := repo.Head()
	if err != nil {
		return "", fmt.Errorf("failed to read HEAD of the clone of %s: %w", url, err)
	}
	_, label := refName(ref)
	return Revision(label + "@sha1:" + head.Hash().String()), nil
}

// Fetch clones ref into a new temporary directory under parent; the caller
// removes the directory when done with it.
func Fetch(ctx context.Context, url string, ref v1.GitRef, auth transport.AuthMethod, parent string) (dir string, rev Revision, err error) {
	dir, err = os.MkdirTemp(parent, "gitsync-")
	if err != nil {
		return "", "", err
	}
	rev, err = clone(ctx, url, ref, auth, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", "", err
	}
	return dir, rev, nil
}

// refName is the full ref of a branch or tag and the short name revisions
// are labelled with; the API defaults to branch main.
func refName(ref v1.GitRef) (plumbing.ReferenceName, string) {
	switch {
	case ref.Tag != "":
		return plumbing.NewTagReferenceName(ref.Tag), ref.Tag
	case ref.Branch != "":
		return plumbing.NewBranchReferenceName(ref.Branch), ref.Branch
	default:
		return plumbing.NewBranchReferenceName("main"), "main"
	}
}

func refKind(ref v1.GitRef) string {
	if ref.Tag != "" {
		return "tag"
	}
	return "branch"
}
