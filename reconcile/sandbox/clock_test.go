package sandbox

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// TestCreationClock: a creation seen within the second its
// creationTimestamp names is timed from when it was seen, once; one seen
// later, or never, from the creationTimestamp.
func TestCreationClock(t *testing.T) {
	second := time.Date(2026, 11, 30, 5, 0, 7, 0, time.UTC)
	sandboxAt := func(uid string) *v1.Sandbox {
		return &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), CreationTimestamp: metav1.NewTime(second)}}
	}
	var clock creationClock

	prompt := sandboxAt("prompt")
	seen := second.Add(730 * time.Millisecond)
	clock.noteCreated(prompt, seen)
	if got := clock.createdAt(prompt); !got.Equal(seen) {
		t.Errorf("seen within its second: created at %v, want %v", got, seen)
	}
	if got := clock.createdAt(prompt); !got.Equal(second) {
		t.Errorf("asked again: created at %v, want the creationTimestamp %v", got, second)
	}

	late := sandboxAt("late")
	clock.noteCreated(late, second.Add(1500*time.Millisecond))
	if got := clock.createdAt(late); !got.Equal(second) {
		t.Errorf("seen a second and a half later (a restart's list): created at %v, want %v", got, second)
	}

	gone := sandboxAt("gone")
	clock.noteCreated(gone, seen)
	clock.forget(gone)
	if got := clock.createdAt(gone); !got.Equal(second) {
		t.Errorf("after forget: created at %v, want %v", got, second)
	}
}
