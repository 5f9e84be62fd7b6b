package warmpool

import (
	"sync"
	"time"
)

// expectations remembers members this replica created that its cache has not
// shown yet. Without it, a reconcile that runs before the informer catches up
// would count too few members and create more (the over-creation upstream
// agent-sandbox fixed the same way). Losing it on a restart is harmless: a
// new process starts from a fresh list, which already shows every member
// created before.
type expectations struct {
	mu      sync.Mutex
	pending map[string]map[string]time.Time // pool -> member -> created
}

// expectationTTL forgets a creation the cache never showed (the namespace
// was deleted at once, say), so the pool is not short forever.
const expectationTTL = 30 * time.Second

func newExpectations() *expectations {
	return &expectations{pending: map[string]map[string]time.Time{}}
}

// created records a member create.
func (e *expectations) created(pool, member string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending[pool] == nil {
		e.pending[pool] = map[string]time.Time{}
	}
	e.pending[pool][member] = time.Now()
}

// unseen drops the members the cache now shows (and expired entries) and
// returns how many created members it still does not show.
func (e *expectations) unseen(pool string, seen map[string]bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, at := range e.pending[pool] {
		if seen[name] || time.Since(at) > expectationTTL {
			delete(e.pending[pool], name)
		}
	}
	return len(e.pending[pool])
}
