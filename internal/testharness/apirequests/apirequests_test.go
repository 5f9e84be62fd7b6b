package apirequests

import "testing"

func TestSinceKeepsWhatWasAnswered(t *testing.T) {
	before := Counts{"POST rolebindings": 10, "GET warmpools": 4, "PATCH namespaces": 2}
	after := Counts{"POST rolebindings": 30, "GET warmpools": 4, "PATCH namespaces": 12, "POST sandboxes": 20}
	got := after.Since(before)
	if len(got) != 3 || got["POST rolebindings"] != 20 || got["PATCH namespaces"] != 10 || got["POST sandboxes"] != 20 {
		t.Fatalf("Since = %v, want the three kinds that grew, by how much", got)
	}
	if got.Total() != 50 {
		t.Errorf("Total = %v, want 50", got.Total())
	}
	want := "PATCH namespaces 0.50, POST rolebindings 1.00, POST sandboxes 1.00"
	if per := got.Per(20); per != want {
		t.Errorf("Per(20) = %q, want %q", per, want)
	}
}

func TestTopIsTheLargestFirst(t *testing.T) {
	c := Counts{"PUT leases": 720, "PATCH nodes/status": 300, "GET namespaces": 12, "PUT resourcequotas/status": 300}
	if got, want := c.Top(3), "PUT leases 720, PATCH nodes/status 300, PUT resourcequotas/status 300"; got != want {
		t.Errorf("Top(3) = %q, want %q", got, want)
	}
	if got := (Counts{}).Top(3); got != "" {
		t.Errorf("Top of none = %q", got)
	}
}
