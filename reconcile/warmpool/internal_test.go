package warmpool

import (
	"testing"
	"time"
)

func TestTopUp(t *testing.T) {
	now := time.Now()
	ago := func(ds ...time.Duration) []time.Time {
		var at []time.Time
		for _, d := range ds {
			at = append(at, now.Add(-d))
		}
		return at
	}
	burst := ago(700*time.Millisecond, 500*time.Millisecond, 300*time.Millisecond)
	for _, tt := range []struct {
		name                string
		claims              []time.Time
		have, missing, want int
		build               int
		wait                time.Duration
	}{
		{name: "no claim seen", have: 5, missing: 5, want: 10, build: 5},
		{name: "one claim just now", claims: ago(10 * time.Millisecond), have: 2, missing: 1, want: 3, build: 1},
		{name: "claims one after another", claims: ago(1500*time.Millisecond, 800*time.Millisecond, 100*time.Millisecond), have: 2, missing: 1, want: 3, build: 1},
		{name: "a burst paused", claims: ago(2500*time.Millisecond, 2300*time.Millisecond, 2*claimQuiet), have: 5, missing: 5, want: 10, build: 5},
		{name: "a burst, a quarter left", claims: burst, have: 25, missing: 75, want: 100, wait: claimQuiet - 300*time.Millisecond},
		{name: "a burst, below a quarter", claims: burst, have: 20, missing: 80, want: 100, build: 5, wait: claimQuiet - 300*time.Millisecond},
		{name: "a quarter rounds up", claims: burst, have: 0, missing: 1, want: 1, build: 1, wait: claimQuiet - 300*time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			build, wait := topUp(tt.claims, tt.have, tt.missing, tt.want, now)
			if build != tt.build || wait != tt.wait {
				t.Errorf("topUp = %d, %v; want %d, %v", build, wait, tt.build, tt.wait)
			}
		})
	}
}

// TestClaimedBuildIsForgotten: a member claimed before the cache showed it
// complete is no build still to come, or the pool would count it as on its
// way, and stay short, until expectationTTL.
func TestClaimedBuildIsForgotten(t *testing.T) {
	m := newMemory()
	m.building("pool", "sandbox-wp-pool-1")
	m.building("pool", "sandbox-wp-pool-2")
	m.claimed("pool", "sandbox-wp-pool-1", time.Now())
	if unseen, _ := m.observe("pool", nil); unseen != 1 {
		t.Errorf("%d builds unseen after one of two was claimed; want 1", unseen)
	}
}
