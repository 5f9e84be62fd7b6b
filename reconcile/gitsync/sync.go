package gitsync

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/source"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// healthInterval is how often a sync looks at what it applied while
// waiting for it to converge.
const healthInterval = 500 * time.Millisecond

// sync fetches and reads the revision, then runs gitops.Sync on it, which
// validates, applies, prunes and waits for health, in that order, and
// stops at the first step that fails, so a bad revision writes nothing.
// Before it creates an object it records it in the inventory through
// patcher (see gitops/doc.go).
func (r *Reconciler) sync(ctx context.Context, gs *v1.GitSync, patcher *statuspatch.Patcher) (*ssa.ChangeSet, *problem.Problem) {
	ap, err := r.applierFor(ctx, gs)
	if err != nil {
		return nil, problem.New(v1.ReasonServiceAccountNotFound, "%s", err)
	}
	auth, err := r.auth(ctx, gs)
	if err != nil {
		return nil, problem.New(v1.ReasonAuthenticationFailed, "%s", err)
	}
	co, err := r.fetch(ctx, gs, auth)
	if err != nil {
		return nil, problem.New(v1.ReasonFetchFailed, "%s", err)
	}
	gs.Status.LastFetchedRevision = string(co.rev)
	gs.Status.LastAttemptedRevision = string(co.rev)

	declared, err := r.read(gs, co)
	if err != nil {
		return nil, problem.Stall(v1.ReasonBuildFailed, "revision %s: %v", co.rev, err)
	}
	owner := ""
	if gs.Spec.PruneOrDefault() {
		owner = gs.Name
	}
	res, err := gitops.Sync{
		Applier:      ap,
		Declarations: declared.decls,
		Previous:     gs.Status.Inventory,
		PruneOwner:   owner,
		Changed:      func(live applier.Live) []declarations.Declaration { return r.changed(gs.UID, declared, live) },
		RecordInventory: func(ctx context.Context, pending []v1.InventoryEntry) error {
			gs.Status.Inventory = pending
			return patcher.Patch(ctx, gs)
		},
		HealthInterval: healthInterval,
	}.Run(ctx)
	// Only what was applied is named: an object an apply has not written
	// has no resourceVersion from it.
	r.recordAdoptions(gs, co.rev, res.Planned)
	if gitops.StageOf(err) == gitops.StageApply {
		// What it wrote before failing is unknown to the memo.
		r.memory.forgetApplied(gs.UID)
	}
	if res.Applied {
		gs.Status.Inventory = res.Inventory
		gs.Status.LastAppliedRevision = string(co.rev)
	}
	if err != nil {
		return res.Changes, syncProblem(co.rev, err)
	}
	r.remember(gs.UID, declared, res.Planned)
	return res.Changes, nil
}

// syncProblem words where a sync of rev stopped for the GitSync's
// conditions. The inventory keeps what a failed apply or prune may have
// left, so a later revision prunes it.
func syncProblem(rev source.Revision, err error) *problem.Problem {
	switch gitops.StageOf(err) {
	case gitops.StageValidate:
		return problem.New(v1.ReasonValidationFailed, "revision %s: dry run refused: %v", rev, err)
	case gitops.StageInventory:
		return problem.New(v1.ReasonApplyFailed, "revision %s: nothing applied: failed to record the inventory before applying: %v", rev, err)
	case gitops.StageApply:
		return problem.New(v1.ReasonApplyFailed, "revision %s: %v", rev, err)
	case gitops.StagePrune:
		return problem.New(v1.ReasonPruneFailed, "revision %s: %v", rev, err)
	case gitops.StageHealth:
		return problem.New(v1.ReasonHealthCheckFailed, "revision %s applied, but %v", rev, err)
	}
	return problem.New(v1.ReasonValidationFailed, "revision %s: %v", rev, err)
}

// auth reads the credentials Secret, when the GitSync names one.
func (r *Reconciler) auth(ctx context.Context, gs *v1.GitSync) (transport.AuthMethod, error) {
	if gs.Spec.SecretRef == nil {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: r.namespace, Name: gs.Spec.SecretRef.Name}
	secret := &corev1.Secret{}
	if err := r.uncached.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("spec.secretRef: secret %s not found", key)
		}
		return nil, fmt.Errorf("spec.secretRef: failed to read secret %s: %w", key, err)
	}
	return source.Auth(gs.Spec.URL, key.String(), secret.Data)
}

// applierFor returns the applier a GitSync's declarations go through: the
// reconciler's own, or one acting as spec.serviceAccountName once that
// ServiceAccount is found (the API server would let the reconciler act as
// one that does not exist, and refuse each request for lack of access).
// Each reads from the API server: the manager's client would start an
// informer for the metadata ListLive reads.
func (r *Reconciler) applierFor(ctx context.Context, gs *v1.GitSync) (*applier.Applier, error) {
	name := gs.Spec.ServiceAccountName
	key := types.NamespacedName{Namespace: r.namespace, Name: name}
	if name != "" {
		if err := r.uncached.Get(ctx, key, &corev1.ServiceAccount{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("spec.serviceAccountName: ServiceAccount %s not found", key)
			}
			return nil, fmt.Errorf("spec.serviceAccountName: failed to read ServiceAccount %s: %w", key, err)
		}
	}
	return r.memory.applier(name, func() (*applier.Applier, error) {
		cfg := rest.CopyConfig(r.config)
		if name != "" {
			// The API server adds the ServiceAccount's groups to the username.
			cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + r.namespace + ":" + name}
		}
		c, err := client.New(cfg, client.Options{Scheme: r.Scheme(), Mapper: r.mapper})
		if err != nil && name != "" {
			return nil, fmt.Errorf("spec.serviceAccountName: failed to make a client acting as %s: %w", key, err)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to make an API server client: %w", err)
		}
		if name != "" {
			return applier.New(c).WithAdmissionReader(r.uncached), nil
		}
		// The reconciler may read whatever it applies; a ServiceAccount
		// may not read what the reconciler's cache holds.
		return applier.New(c).WithHealthCache(r.cache), nil
	})
}

// fetch returns a checkout of the revision the ref points at now, cloning
// only when the kept checkout holds another revision.
func (r *Reconciler) fetch(ctx context.Context, gs *v1.GitSync, auth transport.AuthMethod) (checkout, error) {
	rev, err := source.Resolve(ctx, gs.Spec.URL, gs.Spec.Ref, auth)
	if err != nil {
		return checkout{}, err
	}
	if kept, ok := r.memory.checkout(gs.UID); ok && kept.rev == rev {
		return kept, nil
	}
	dir, rev, err := source.Fetch(ctx, gs.Spec.URL, gs.Spec.Ref, auth, r.workDir)
	if err != nil {
		return checkout{}, err
	}
	co := checkout{dir: dir, rev: rev}
	r.memory.keepCheckout(gs.UID, co)
	return co, nil
}

// read returns the declarations of the checkout below spec.path, labelled
// as gs's, decoding them only when the checkout or the path is new. They
// are not changed afterwards: the applier copies what it sends.
func (r *Reconciler) read(gs *v1.GitSync, co checkout) (*declaredRevision, error) {
	path := gs.Spec.PathOrDefault()
	if co.parsed != nil && co.parsed.path == path {
		return co.parsed, nil
	}
	decls, err := declarations.ReadDir(co.dir, path)
	if err != nil {
		return nil, err
	}
	applier.SetOwner(decls, gs.Name)
	declared := &declaredRevision{path: path, decls: decls, fingerprints: make([][sha256.Size]byte, len(decls))}
	for i, d := range decls {
		if declared.fingerprints[i], err = fingerprint(d); err != nil {
			return nil, err
		}
	}
	co.parsed = declared
	r.memory.keepParsed(gs.UID, co)
	return declared, nil
}
