package gitsync

import (
	"fmt"
	"testing"
	"time"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
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

func TestUnionKeepsOrderAndDropsDuplicates(t *testing.T) {
	a := []v1.InventoryEntry{{ID: "g_K_b"}, {ID: "g_K_a"}}
	b := []v1.InventoryEntry{{ID: "g_K_a"}, {ID: "g_K_c"}}
	if got := fmt.Sprint(union(a, b)); got != "[{g_K_b } {g_K_a } {g_K_c }]" {
		t.Errorf("union = %s", got)
	}
}
