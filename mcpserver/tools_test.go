package mcpserver

import (
	"strings"
	"testing"
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
