package mcpserver

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

func TestCappedKeepsTheFirstBytesAndCountsTheRest(t *testing.T) {
	c := &capped{limit: 5}
	for _, chunk := range []string{"abc", "defg", "", "hi"} {
		if n, err := c.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; a capped writer takes everything", chunk, n, err)
		}
	}
	if got := c.buf.String(); got != "abcde" || c.dropped != 4 {
		t.Errorf("kept %q, dropped %d; want \"abcde\", 4", got, c.dropped)
	}
}

// A cap that falls inside a UTF-8 character keeps the text valid: the
// character's first bytes go with the rest, counted.
func TestCappedNeverCutsACharacter(t *testing.T) {
	for _, tc := range []struct {
		limit   int
		in      string
		want    string
		dropped int64
	}{
		{4, "abcé", "abc", 2},  // é is 2 bytes: 1 of them fits
		{4, "ab€cd", "ab", 5},  // € is 3 bytes: 2 of them fit
		{5, "ab😀x", "ab", 5},   // 😀 is 4 bytes: 3 of them fit
		{6, "ab😀x", "ab😀", 1},  // all 4 fit
		{3, "abcdé", "abc", 3}, // cut between characters: nothing more
		{8, "abcé", "abcé", 0}, // no cut
	} {
		c := &capped{limit: tc.limit}
		_, _ = c.Write([]byte(tc.in))
		if got := c.text(); got != tc.want || c.dropped != tc.dropped {
			t.Errorf("cap %d of %q: kept %q, dropped %d; want %q, %d", tc.limit, tc.in, got, c.dropped, tc.want, tc.dropped)
		}
	}
}

// Output that is not UTF-8 text, or asked for as base64, comes as base64
// of every byte kept; text stays text.
func TestCappedEncodesBinaryAsBase64(t *testing.T) {
	for _, tc := range []struct {
		limit    int
		in       string
		asked    bool
		want     string
		encoding string
		dropped  int64
	}{
		{8, "\x00\xff\xfe", false, "AP/+", encodingBase64, 0}, // not UTF-8
		{8, "hi", true, "aGk=", encodingBase64, 0},            // asked for
		{8, "hi", false, "hi", "", 0},                         // text
		{4, "abcé", false, "abc", "", 2},                      // a cut character is text, trimmed
		{4, "abcé", true, "YWJjww==", encodingBase64, 1},      // or every byte kept, as base64
	} {
		c := &capped{limit: tc.limit}
		_, _ = c.Write([]byte(tc.in))
		got, encoding := c.encoded(tc.asked)
		if got != tc.want || encoding != tc.encoding || c.dropped != tc.dropped {
			t.Errorf("%q (cap %d, base64 asked %v): %q %q dropped %d; want %q %q dropped %d",
				tc.in, tc.limit, tc.asked, got, encoding, c.dropped, tc.want, tc.encoding, tc.dropped)
		}
	}
}

func TestDecodeNamesTheBadInput(t *testing.T) {
	if got, err := decode("aGk=", encodingBase64); err != nil || string(got) != "hi" {
		t.Errorf("base64: %q, %v", got, err)
	}
	if got, err := decode("hi", ""); err != nil || string(got) != "hi" {
		t.Errorf("text by default: %q, %v", got, err)
	}
	if _, err := decode("not base64!", encodingBase64); err == nil || !strings.Contains(err.Error(), "not base64") {
		t.Errorf("bad base64: %v", err)
	}
	if _, err := decode("x", "hex"); err == nil || !strings.Contains(err.Error(), `encoding "hex": use text or base64`) {
		t.Errorf("unknown encoding: %v", err)
	}
}

// A sandbox that is not ready says why, in the words the controller
// recorded (here the kubelet's).
func TestDescribeSaysWhyNotReady(t *testing.T) {
	why := "node n1 has not started the pod since it was scheduled at 2026-12-02T12:00:00Z: kubelet says FailedCreatePodSandBox: no runtime"
	sbx := &v1.Sandbox{Status: v1.SandboxStatus{Phase: v1.SandboxPhaseStarting, Conditions: []metav1.Condition{
		{Type: v1.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1.ReasonPodNotStarting, Message: why}}}}
	if got := describe(sbx); got.Ready || got.Message != why {
		t.Errorf("describe = %+v, want not ready with message %q", got, why)
	}
	sbx.Status = v1.SandboxStatus{Phase: v1.SandboxPhaseRunning, PodName: "sandbox", Conditions: []metav1.Condition{
		{Type: v1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1.ReasonPodReady, Message: "running"}}}
	if got := describe(sbx); !got.Ready || got.Message != "" {
		t.Errorf("describe of a ready sandbox = %+v, want ready and no message", got)
	}
}
