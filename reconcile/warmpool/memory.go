package warmpool

import (
	"sync"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// memory is everything the controller remembers from one pass to the next,
// by pool: the members it is building until its cache shows them complete,
// and when the pool last lost members to claims.
//
// Without the first, a pass that runs before the informer catches up would
// count too few members and create more (the over-creation upstream
// agent-sandbox fixed the same way), or take a member whose pod is on its
// way for one whose build was cut short and create its objects again. The
// second lets a pool tell a burst of claims, during which it holds back
// its top-up, from claims that come one by one.
//
// Losing it all on a restart is harmless: a new process starts from a
// fresh list, which shows every object created before, and a pool whose
// last claims are forgotten tops up at once, which it would do a second later
// anyway.
type memory struct {
	mu    sync.Mutex
	pools map[string]*poolMemory
}

type poolMemory struct {
	// building holds, by member, when its build started.
	building map[string]time.Time
	// claims is what the pool remembers of its last claims.
	claims claimRun
}

// expectationTTL forgets a build the cache never showed complete (the
// namespace was deleted at once, say), so the pool is not short forever.
const expectationTTL = 30 * time.Second

func newMemory() *memory {
	return &memory{pools: map[string]*poolMemory{}}
}

// of returns the pool's memory, creating it; the caller holds mu.
func (m *memory) of(pool string) *poolMemory {
	p := m.pools[pool]
	if p == nil {
		p = &poolMemory{building: map[string]time.Time{}}
		m.pools[pool] = p
	}
	return p
}

// building records the start of a member's build.
func (m *memory) building(pool, member string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.of(pool).building[member] = time.Now()
}

// failed forgets a build that returned an error, so the next pass completes
// the member instead of waiting for it.
func (m *memory) failed(pool, member string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.of(pool).building, member)
}

// observe drops the builds the cache shows complete (and expired ones) and
// returns how many builds the cache does not show at all yet, and which
// members it shows are still being built.
func (m *memory) observe(pool string, members []environment.Member) (unseen int, inFlight map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	building := m.of(pool).building
	visible := make(map[string]bool, len(members))
	for _, member := range members {
		visible[member.Namespace.Name] = true
		if member.Complete {
			delete(building, member.Namespace.Name)
		}
	}
	inFlight = map[string]bool{}
	for name, at := range building {
		switch {
		case time.Since(at) > expectationTTL:
			delete(building, name)
		case visible[name]:
			inFlight[name] = true
		default:
			unseen++
		}
	}
	return unseen, inFlight
}

// claimed notes that a member of the pool was claimed at, and forgets its
// build if it is still remembered: once claimed it is no longer the pool's,
// and the cache will never show it complete among the members.
func (m *memory) claimed(pool, member string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.of(pool)
	delete(p.building, member)
	p.claims = p.claims.add(at)
}

// recentClaims returns what the pool remembers of its last claims; no
// claim when this process has not seen one.
func (m *memory) recentClaims(pool string) claimRun {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pools[pool]; p != nil {
		return p.claims
	}
	return claimRun{}
}

// forget drops what is remembered of a pool that is gone.
func (m *memory) forget(pool string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pools, pool)
}
