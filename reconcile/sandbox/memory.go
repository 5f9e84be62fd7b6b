package sandbox

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// memory is what the controller remembers from one pass to the next,
// beside the status writes it remembers (statuspatch): the claims this
// process made until the cache shows their members relabelled, and when
// it claimed last; the members it is claiming; and when clients woke idle
// sandboxes.
//
// Claims: a pass that starts from a cache which has not seen the claim's
// own write yet must not claim a second member, nor take the member for
// someone else's namespace, nor read it past the cache because the
// relabel is held (relabelQuiet) or not in the cache yet (relabelTrust).
// Members being claimed: concurrent claims of one pool skip them instead
// of losing the binding's create to a member the cache still shows free.
// Wakes: the wake latency metric is observed when the sandbox is Ready
// again.
//
// Losing it on a restart is harmless: a new process starts from a fresh
// list, which shows every claim made before it (the binding the claim
// created in the member), relabels at once the members whose relabel was
// held, and a wake forgotten is one observation fewer.
type memory struct {
	mu sync.Mutex
	// claims holds, by sandbox name, the member this process claimed for
	// it.
	claims map[string]memberClaim
	// lastClaim is when this process last claimed a member.
	lastClaim time.Time
	// quiet fires relabelQuiet after lastClaim while claims' relabels are
	// held, and wake then hands each held claim's sandbox to the
	// controller's queue (releaseHeld). Nil wake: the relabels wait for
	// the pass each sandbox scheduled at relabelHoldMax.
	quiet *time.Timer
	wake  func(sandbox string)
	// taken holds the names of the members being claimed or claimed and
	// not yet settled, with the sandbox claiming each.
	taken map[string]string
	// wakes holds, by sandbox UID, when a client woke it.
	wakes map[types.UID]time.Time
	// created times sandboxes' creation for the time-to-Ready metric.
	created creationClock
}

// memberClaim is a member namespace, as the claim leaves it once
// relabelled (environment.ClaimedNamespace), the sandbox that claimed it,
// when, and when this process relabelled it (zero until then).
type memberClaim struct {
	sandbox    types.UID
	namespace  *corev1.Namespace
	at         time.Time
	relabelled time.Time
}

// relabelQuiet is how long after this process's last claim a claimed
// member's relabel waits, and relabelHoldMax how long after its own claim
// at most. The relabel is no part of the path to Ready (the claim's
// binding grants access, its status write says where), but it is a write,
// and the garbage collector's and every namespace watcher's work after it:
// sent amid a stream of claims, it slows the claims that follow. Held, a
// burst's relabels go once it pauses, as its members' replacements do
// (warmpool's claimQuiet); a steady stream's go relabelHoldMax behind.
// Until then the member's namespace carries its member labels, which
// nothing looks a sandbox up by: clients, the gateway and the pool find a
// claimed member by its Sandbox's status and its owner's binding.
//
// A held sandbox is looked at again once for each: at relabelHoldMax by
// its own pass's requeue, and when claims pause by releaseHeld. Were each
// to requeue itself until claims paused, a stream would bring every held
// sandbox a pass a second, about ten a claim, on the cores the claims
// share.
const (
	relabelQuiet   = time.Second
	relabelHoldMax = 10 * time.Second
)

// relabelTrust is how long a relabel this process wrote explains a cache
// that does not show it. The pass right after a claim (its own status
// write brings it) usually starts before the relabel's event arrives; it
// trusts the relabel instead of reading the namespace past the cache,
// which would put a read, or a second relabel, on the API server just as
// the client's watch is told the sandbox is Ready. A cache still behind
// after this long is asked no more: the namespace is read past it.
const relabelTrust = 10 * time.Second

func newMemory() *memory {
	return &memory{claims: map[string]memberClaim{}, taken: map[string]string{}, wakes: map[types.UID]time.Time{}}
}

// claimOf is the member this process claimed for sbx, nil when none.
func (m *memory) claimOf(sbx *v1.Sandbox) *corev1.Namespace {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.claims[sbx.Name]; ok && c.sandbox == sbx.UID {
		return c.namespace
	}
	return nil
}

// take marks a member as being claimed for sandbox; false when another
// claim of this process has it.
func (m *memory) take(member, sandbox string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, busy := m.taken[member]; busy {
		return false
	}
	m.taken[member] = sandbox
	return true
}

// release hands back a member whose claim did not happen.
func (m *memory) release(member string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.taken, member)
}

// claimed records that sbx claimed the member ns at at, now, and sets
// quiet to release the held relabels once claims pause.
func (m *memory) claimed(sbx *v1.Sandbox, ns *corev1.Namespace, at, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims[sbx.Name] = memberClaim{sandbox: sbx.UID, namespace: ns, at: at}
	m.lastClaim = now
	if m.quiet == nil && m.wake != nil {
		m.quiet = time.AfterFunc(relabelQuiet, m.releaseHeld)
	}
}

// releaseHeld wakes the sandboxes whose relabels are held once this
// process has claimed nothing for relabelQuiet, and otherwise waits until
// it may have. The timer is set again only by a claim after that: with
// none, nothing is held.
func (m *memory) releaseHeld() {
	m.mu.Lock()
	if wait := relabelQuiet - time.Since(m.lastClaim); wait > 0 {
		m.quiet.Reset(wait)
		m.mu.Unlock()
		return
	}
	m.quiet = nil
	wake := m.wake
	var held []string
	for name, c := range m.claims {
		if c.relabelled.IsZero() {
			held = append(held, name)
		}
	}
	m.mu.Unlock()
	for _, name := range held {
		wake(name)
	}
}

// wakeWith sets what releaseHeld hands a held relabel's sandbox to.
func (m *memory) wakeWith(wake func(sandbox string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wake = wake
}

// heldRelabel is the claim of sbx whose relabel this process has not
// written, and how long until it is due: at once when this process has
// claimed nothing for relabelQuiet, else relabelHoldMax after the claim;
// held is false when there is none.
func (m *memory) heldRelabel(sbx *v1.Sandbox, now time.Time) (c memberClaim, wait time.Duration, held bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.claims[sbx.Name]
	if !ok || c.sandbox != sbx.UID || !c.relabelled.IsZero() {
		return memberClaim{}, 0, false
	}
	if now.Sub(m.lastClaim) >= relabelQuiet {
		return c, 0, true
	}
	return c, max(0, relabelHoldMax-now.Sub(c.at)), true
}

// noteRelabelled records that the relabel of the member sbx claimed
// landed at at.
func (m *memory) noteRelabelled(sbx *v1.Sandbox, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.claims[sbx.Name]; ok && c.sandbox == sbx.UID {
		c.relabelled = at
		m.claims[sbx.Name] = c
	}
}

// relabelAhead tells whether this process claimed namespace for sbx and
// holds its relabel, or wrote it within relabelTrust before now: either
// explains a cache that shows the namespace as a member still.
func (m *memory) relabelAhead(sbx *v1.Sandbox, namespace string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.claims[sbx.Name]
	return ok && c.sandbox == sbx.UID && c.namespace.Name == namespace &&
		(c.relabelled.IsZero() || now.Sub(c.relabelled) < relabelTrust)
}

// forgetClaim drops a sandbox's claim once the cache shows its member
// relabelled, or the sandbox is gone.
func (m *memory) forgetClaim(sandbox string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.claims[sandbox]; ok {
		delete(m.taken, c.namespace.Name)
		delete(m.claims, sandbox)
	}
}

// woken records when a client woke the sandbox of uid.
func (m *memory) woken(uid types.UID, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wakes[uid] = at
}

// wokenAt returns, and forgets, when a client woke the sandbox of uid.
func (m *memory) wokenAt(uid types.UID) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.wakes[uid]
	delete(m.wakes, uid)
	return at, ok
}
