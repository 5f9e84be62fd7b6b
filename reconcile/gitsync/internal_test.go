package gitsync

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
)

func TestJitterStaysWithinTenPercent(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := jitter(time.Minute)
		if d < 54*time.Second || d > 66*time.Second {
			t.Fatalf("jitter(1m) = %s, outside ±10%%", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("jitter returned only %d distinct values in 1000 calls", len(seen))
	}
}

func TestSummarizeCountsWhatItDoesNotList(t *testing.T) {
	cs := ssa.NewChangeSet()
	for i := range 12 {
		cs.Add(ssa.ChangeSetEntry{Subject: fmt.Sprintf("NodePool/p%d", i), Action: ssa.CreatedAction})
	}
	cs.Add(ssa.ChangeSetEntry{Subject: "NodePool/same", Action: ssa.UnchangedAction})
	got := summarize(cs)
	if !strings.HasPrefix(got, "NodePool/p0 created, NodePool/p1 created") || !strings.HasSuffix(got, "NodePool/p9 created and 2 more") {
		t.Errorf("summarize = %q", got)
	}
	if summarize(ssa.NewChangeSet()) != "" {
		t.Error("an empty change set has a summary")
	}
}
