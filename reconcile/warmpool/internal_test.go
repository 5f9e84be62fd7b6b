package warmpool

import (
	"testing"
	"time"
)

func TestTopUp(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name                string
		claimed             time.Duration // before now; 0: never
		have, missing, want int
		build               int
		wait                time.Duration
	}{
		{name: "no claim seen", have: 5, missing: 5, want: 10, build: 5},
		{name: "claims paused", claimed: 2 * claimQuiet, have: 5, missing: 5, want: 10, build: 5},
		{name: "claims arriving, a quarter left", claimed: 300 * time.Millisecond, have: 25, missing: 75, want: 100, wait: claimQuiet - 300*time.Millisecond},
		{name: "claims arriving, below a quarter", claimed: 300 * time.Millisecond, have: 20, missing: 80, want: 100, build: 5, wait: claimQuiet - 300*time.Millisecond},
		{name: "a quarter rounds up", claimed: 300 * time.Millisecond, have: 0, missing: 1, want: 1, build: 1, wait: claimQuiet - 300*time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var lastClaim time.Time
			if tt.claimed > 0 {
				lastClaim = now.Add(-tt.claimed)
			}
			build, wait := topUp(lastClaim, tt.have, tt.missing, tt.want, now)
			if build != tt.build || wait != tt.wait {
				t.Errorf("topUp = %d, %v; want %d, %v", build, wait, tt.build, tt.wait)
			}
		})
	}
}
