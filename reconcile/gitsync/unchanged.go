package gitsync

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// appliedObject is what a declared object looked like right after a sync
// that applied it and saw it healthy. The controller's memory keeps one
// per GitSync and declared object ID, so a resync skips the dry run and
// the apply of every object nobody has touched since: a no-op resync
// writes nothing. A restarted reconciler starts empty and checks
// everything once.
type appliedObject struct {
	// fingerprint is the hash of the declaration as applied.
	fingerprint [sha256.Size]byte
	// generation is the object's metadata.generation then: anyone changing
	// its spec since (kubectl edit, another manager) moves it.
	generation int64
}

// changed returns the declarations a sync must validate and apply: new or
// edited ones, and those whose object's generation moved, that lost a
// declared label or annotation, or that are gone. live are the objects as
// listed from the API server just before, not from the cache: a hand edit
// made just before a requested sync must be seen.
func (r *Reconciler) changed(uid types.UID, declared *declaredRevision, live applier.Live) []declarations.Declaration {
	memo := r.memory.appliedBy(uid)
	if len(memo) == 0 {
		return declared.decls
	}
	var out []declarations.Declaration
	for i, d := range declared.decls {
		was, ok := memo[declarations.ID(d.Object)]
		obj, exists := live[applier.KeyOf(d)]
		if ok && exists && was.fingerprint == declared.fingerprints[i] && was.generation == obj.Generation && obj.KeepsDeclaredMetadata {
			continue
		}
		out = append(out, d)
	}
	return out
}

// remember records every declared object after a successful sync: the
// generation the apply answered with (or the live one, for an object the
// dry run found unchanged) for what this sync validated, and the previous
// record for what it skipped as untouched. No listing is needed, and an
// edit made after the apply still shows as a moved generation next time.
func (r *Reconciler) remember(uid types.UID, declared *declaredRevision, validated []applier.Change) {
	generation := make(map[string]int64, len(validated))
	for _, c := range validated {
		generation[declarations.ID(c.Declaration.Object)] = c.Generation
	}
	old := r.memory.appliedBy(uid)
	memo := make(map[string]appliedObject, len(declared.decls))
	for i, d := range declared.decls {
		id := declarations.ID(d.Object)
		g, ok := generation[id]
		if !ok {
			if was, kept := old[id]; kept {
				memo[id] = was
			}
			continue
		}
		memo[id] = appliedObject{fingerprint: declared.fingerprints[i], generation: g}
	}
	r.memory.setApplied(uid, memo)
}

func fingerprint(d declarations.Declaration) ([sha256.Size]byte, error) {
	b, err := json.Marshal(d.Object.Object)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("%s: %w", d.Where(), err)
	}
	return sha256.Sum256(b), nil
}
