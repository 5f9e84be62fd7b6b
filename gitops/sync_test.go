package gitops

import (
	"errors"
	"fmt"
	"testing"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

func TestUnionKeepsOrderAndDropsDuplicates(t *testing.T) {
	a := []v1.InventoryEntry{{ID: "g_K_b"}, {ID: "g_K_a"}}
	b := []v1.InventoryEntry{{ID: "g_K_a"}, {ID: "g_K_c"}}
	if got := fmt.Sprint(union(a, b)); got != "[{g_K_b } {g_K_a } {g_K_c }]" {
		t.Errorf("union = %s", got)
	}
}

func TestStageOfFindsTheStageThroughWrapping(t *testing.T) {
	err := fmt.Errorf("sync: %w", &StageError{Stage: StagePrune, Err: errors.New("refused")})
	if got := StageOf(err); got != StagePrune {
		t.Errorf("StageOf = %q, want %q", got, StagePrune)
	}
	if err.Error() != "sync: refused" {
		t.Errorf("the message is %q, want the stage's own error", err.Error())
	}
	if got := StageOf(errors.New("plain")); got != "" {
		t.Errorf("StageOf(a plain error) = %q, want none", got)
	}
}
