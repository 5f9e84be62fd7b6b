package gitsync

import (
	"crypto/sha256"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/source"
)

// memory is what the controller remembers from one sync to the next,
// beside the status writes it remembers (statuspatch): an applier per
// ServiceAccount, the last checkout of each GitSync with what was read
// from it, and what each GitSync's last successful sync applied.
//
// All of it saves work, none of it is needed for a right answer: a
// restarted reconciler clones each repository once, decodes each revision
// once and checks every object once, and is back where it was.
type memory struct {
	mu sync.Mutex
	// appliers keeps an applier per ServiceAccount ("" for the
	// reconciler's own): a client of its own (impersonation is per
	// connection) that shares the manager's mapper.
	appliers map[string]*applier.Applier
	// checkouts keeps the last checkout of each GitSync, so a sync whose
	// ls-remote shows an unchanged revision re-applies it without cloning.
	checkouts map[types.UID]checkout
	// applied is what each GitSync's last successful sync applied
	// (unchanged.go).
	applied map[types.UID]map[string]appliedObject
}

type checkout struct {
	dir string
	rev source.Revision
	// parsed is what was read below a path of the checkout, kept with
	// it: a resync of an unchanged revision does not decode its
	// thousands of documents again (about a second for 10,000).
	parsed *declaredRevision
}

// declaredRevision is the declarations below a path of a checkout,
// labelled as their GitSync's, each with its fingerprint: nothing changes
// them after read, so each is hashed once per revision, not per resync.
type declaredRevision struct {
	path         string
	decls        []declarations.Declaration
	fingerprints [][sha256.Size]byte
}

func newMemory() *memory {
	return &memory{
		appliers:  map[string]*applier.Applier{},
		checkouts: map[types.UID]checkout{},
		applied:   map[types.UID]map[string]appliedObject{},
	}
}

// applier returns the applier of a ServiceAccount, made by make the first
// time.
func (m *memory) applier(serviceAccount string, make func() (*applier.Applier, error)) (*applier.Applier, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ap, ok := m.appliers[serviceAccount]; ok {
		return ap, nil
	}
	ap, err := make()
	if err != nil {
		return nil, err
	}
	m.appliers[serviceAccount] = ap
	return ap, nil
}

// checkout returns the GitSync's last checkout.
func (m *memory) checkout(uid types.UID) (checkout, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	co, ok := m.checkouts[uid]
	return co, ok
}

// keepCheckout makes co the GitSync's checkout, removing the one it
// replaces from disk.
func (m *memory) keepCheckout(uid types.UID, co checkout) {
	m.mu.Lock()
	kept, ok := m.checkouts[uid]
	m.checkouts[uid] = co
	m.mu.Unlock()
	if ok && kept.dir != co.dir {
		_ = os.RemoveAll(kept.dir)
	}
}

// keepParsed keeps what was read from co with it, unless another
// checkout has replaced it meanwhile.
func (m *memory) keepParsed(uid types.UID, co checkout) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if kept, ok := m.checkouts[uid]; ok && kept.dir == co.dir {
		m.checkouts[uid] = co
	}
}

// appliedBy returns what the GitSync's last successful sync applied.
func (m *memory) appliedBy(uid types.UID) map[string]appliedObject {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied[uid]
}

// setApplied records what the GitSync's sync applied.
func (m *memory) setApplied(uid types.UID, applied map[string]appliedObject) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applied[uid] = applied
}

// forgetApplied drops what a GitSync applied, so its next sync checks
// everything.
func (m *memory) forgetApplied(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.applied, uid)
}

// keepOnly drops the checkouts (from disk too) and the records of the
// GitSyncs live does not list.
func (m *memory) keepOnly(live map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, co := range m.checkouts {
		if !live[uid] {
			_ = os.RemoveAll(co.dir)
			delete(m.checkouts, uid)
		}
	}
	for uid := range m.applied {
		if !live[uid] {
			delete(m.applied, uid)
		}
	}
}
