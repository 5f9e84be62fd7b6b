package warmpool

import (
	"testing"
	"time"
)

func TestTopUp(t *testing.T) {
	now := time.Now()
	// claimed is the run of claims made the given times ago, oldest first.
	claimed := func(ago ...time.Duration) claimRun {
		var run claimRun
		for _, d := range ago {
			run = run.add(now.Add(-d))
		}
		return run
	}
	ms := func(n ...int) []time.Duration {
		var ds []time.Duration
		for _, m := range n {
			ds = append(ds, time.Duration(m)*time.Millisecond)
		}
		return ds
	}
	burst := claimed(ms(700, 500, 300)...)
	for _, tt := range []struct {
		name                string
		claims              claimRun
		have, missing, want int
		build               int
		wait                time.Duration
	}{
		{name: "no claim seen", have: 5, missing: 5, want: 10, build: 5},
		{name: "one claim just now", claims: claimed(ms(10)...), have: 2, missing: 1, want: 3, build: 1},
		{name: "claims one after another", claims: claimed(ms(1500, 800, 100)...), have: 2, missing: 1, want: 3, build: 1},
		{name: "a burst paused", claims: claimed(ms(2500, 2300, 2000)...), have: 5, missing: 5, want: 10, build: 5},
		{name: "a burst, a quarter left", claims: burst, have: 25, missing: 75, want: 100, wait: claimQuiet - 300*time.Millisecond},
		{name: "a burst, below a quarter", claims: burst, have: 20, missing: 80, want: 100, build: 5, wait: claimQuiet - 300*time.Millisecond},
		{name: "a quarter rounds up", claims: burst, have: 0, missing: 1, want: 1, build: 1, wait: claimQuiet - 300*time.Millisecond},
		// The last three claims span more than claimQuiet, but the burst
		// never paused for it: it goes on.
		{name: "a burst longer than claimQuiet", claims: claimed(ms(2000, 1800, 1600, 1400, 900, 100)...), have: 25, missing: 75, want: 100, wait: claimQuiet - 100*time.Millisecond},
		{name: "a burst paused, then a claim", claims: claimed(ms(3000, 2900, 2800, 100)...), have: 25, missing: 75, want: 100, build: 75},
		{name: "claims one after another after a burst", claims: claimed(ms(3000, 2900, 2800, 1500, 800, 100)...), have: 2, missing: 1, want: 3, build: 1},
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
