package warmpool

import (
	"sync"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/sandbox"
)

// expectations remembers the members this replica is building or has built
// until its cache shows them complete (namespace and pod). Without it, a
// pass that runs before the informer catches up would count too few members
// and create more (the over-creation upstream agent-sandbox fixed the same
// way), or take a member whose pod is on its way for one whose build was cut
// short and create its objects again. Losing it on a restart is harmless: a
// new process starts from a fresh list, which shows every object created
// before.
type expectations struct {
	mu      sync.Mutex
	pending map[string]map[string]time.Time // pool -> member -> created
}

// expectationTTL forgets a build the cache never showed complete (the
// namespace was deleted at once, say), so the pool is not short forever.
const expectationTTL = 30 * time.Second

func newExpectations() *expectations {
	return &expectations{pending: map[string]map[string]time.Time{}}
}

// building records the start of a member's build.
func (e *expectations) building(pool, member string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending[pool] == nil {
		e.pending[pool] = map[string]time.Time{}
	}
	e.pending[pool][member] = time.Now()
}

// failed forgets a build that returned an error, so the next pass completes
// the member instead of waiting for it.
func (e *expectations) failed(pool, member string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending[pool], member)
}

// observe drops the builds the cache shows complete (and expired ones) and
// returns how many builds the cache does not show at all yet, and which
// members it shows are still being built.
func (e *expectations) observe(pool string, members []sandbox.Member) (unseen int, inFlight map[string]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	visible := make(map[string]bool, len(members))
	for _, m := range members {
		visible[m.Namespace.Name] = true
		if m.Complete {
			delete(e.pending[pool], m.Namespace.Name)
		}
	}
	inFlight = map[string]bool{}
	for name, at := range e.pending[pool] {
		switch {
		case time.Since(at) > expectationTTL:
			delete(e.pending[pool], name)
		case visible[name]:
			inFlight[name] = true
		default:
			unseen++
		}
	}
	return unseen, inFlight
}
