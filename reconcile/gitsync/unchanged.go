package gitsync

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// appliedObject is what a declared object looked like right after a sync
// that applied it and saw it healthy.
type appliedObject struct {
	// fingerprint is the hash of the declaration as applied.
	fingerprint [sha256.Size]byte
	// generation is the object's metadata.generation then: anyone changing
	// its spec since (kubectl edit, another manager) moves it.
	generation int64
}

// appliedMemo remembers, per GitSync and declared object ID, what the last
// successful sync applied, so a resync skips the dry run and the apply of
// every object nobody has touched since: a no-op resync writes nothing. A
// restarted reconciler starts empty and checks everything once.
type appliedMemo map[types.UID]map[string]appliedObject

// changed returns the declarations a sync must validate and apply: new or
// edited ones, and those whose object's generation moved, that lost a
// declared label or annotation, or that are gone. The objects are listed
// from the API server, one request per kind, not from the cache: a hand
// edit made just before a requested sync must be seen.
func (r *Reconciler) changed(ctx context.Context, uid types.UID, decls []declarations.Declaration) ([]declarations.Declaration, error) {
	r.mu.Lock()
	memo := maps.Clone(r.applied[uid])
	r.mu.Unlock()
	if len(memo) == 0 {
		return decls, nil
	}
	live, err := r.applier.ListLive(ctx, decls)
	if err != nil {
		return nil, err
	}
	var out []declarations.Declaration
	for _, d := range decls {
		was, ok := memo[declarations.ID(d.Object)]
		obj, exists := live[applier.KeyOf(d)]
		fp, err := fingerprint(d)
		if err != nil {
			return nil, err
		}
		if ok && exists && was.fingerprint == fp && was.generation == obj.GetGeneration() &&
			contains(obj.GetLabels(), d.Object.GetLabels()) && contains(obj.GetAnnotations(), d.Object.GetAnnotations()) {
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// remember records every declared object after a successful sync.
func (r *Reconciler) remember(ctx context.Context, uid types.UID, decls []declarations.Declaration) error {
	live, err := r.applier.ListLive(ctx, decls)
	if err != nil {
		return err
	}
	memo := make(map[string]appliedObject, len(decls))
	for _, d := range decls {
		obj, ok := live[applier.KeyOf(d)]
		if !ok {
			continue
		}
		fp, err := fingerprint(d)
		if err != nil {
			return err
		}
		memo[declarations.ID(d.Object)] = appliedObject{fingerprint: fp, generation: obj.GetGeneration()}
	}
	r.mu.Lock()
	r.applied[uid] = memo
	r.mu.Unlock()
	return nil
}

// forget drops what a GitSync applied, so its next sync checks everything.
func (r *Reconciler) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.applied, uid)
	r.mu.Unlock()
}

func fingerprint(d declarations.Declaration) ([sha256.Size]byte, error) {
	b, err := json.Marshal(d.Object.Object)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("%s: %w", d.Where(), err)
	}
	return sha256.Sum256(b), nil
}

// contains reports whether have holds every key of want with its value.
func contains(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
