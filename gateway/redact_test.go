package gateway

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// chunks is a body that arrives in the given pieces.
type chunks struct{ parts []string }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	if c.parts[0] = c.parts[0][n:]; c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func (c *chunks) Close() error { return nil }

func redact(t *testing.T, secret string, parts ...string) string {
	t.Helper()
	r := &redactor{src: &chunks{parts: parts}, secret: []byte(secret), mask: maskByte([]byte(secret))}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestRedactorMasksWhereverTheSecretIsSplit(t *testing.T) {
	const secret = "sk-abcdef"
	for _, text := range []string{
		"before sk-abcdef after",
		"sk-abcdef",
		"sk-abcdefsk-abcdef twice, back to back",
		"sk-sk-abcdef, a false start first",
		"ends with a beginning sk-abc",
		"no secret here at all",
	} {
		want := strings.ReplaceAll(text, secret, "*********")
		for cut := 0; cut <= len(text); cut++ {
			if got := redact(t, secret, text[:cut], text[cut:]); got != want {
				t.Errorf("%q cut at %d: %q, want %q", text, cut, got, want)
			}
		}
		// One byte at a time.
		var bytewise []string
		for i := range len(text) {
			bytewise = append(bytewise, text[i:i+1])
		}
		if got := redact(t, secret, bytewise...); got != want {
			t.Errorf("%q byte by byte: %q, want %q", text, got, want)
		}
	}
}

func TestRedactorMaskNeverRebuildsTheSecret(t *testing.T) {
	// A secret made of the usual mask byte gets another mask.
	const secret = "*a*"
	if got := redact(t, secret, "x*a*a*", "*a*y"); strings.Contains(got, secret) {
		t.Errorf("output %q holds the secret", got)
	}
}

func TestRedactorHoldsBackOnlyAPossibleBeginning(t *testing.T) {
	pr, pw := io.Pipe()
	r := &redactor{src: pr, secret: []byte("sk-abcdef"), mask: '*'}
	read := func() string {
		got := make(chan string)
		go func() {
			buf := make([]byte, 64)
			n, _ := r.Read(buf)
			got <- string(buf[:n])
		}()
		select {
		case s := <-got:
			return s
		case <-time.After(5 * time.Second):
			t.Fatal("Read waited for more than the secret could need")
			return ""
		}
	}
	go func() { _, _ = io.WriteString(pw, "data: one\n\n") }()
	if got := read(); got != "data: one\n\n" {
		t.Errorf("first read %q: nothing in it could begin the secret", got)
	}
	go func() { _, _ = io.WriteString(pw, "data: sk-ab") }()
	if got := read(); got != "data: " {
		t.Errorf("second read %q, want the bytes before a possible secret", got)
	}
	go func() { _, _ = io.WriteString(pw, "cdef!") }()
	if got := read(); got != "*********!" {
		t.Errorf("third read %q", got)
	}
}

func TestRedactorRunsAtEOFBeforeTheEnd(t *testing.T) {
	ran := false
	r := &redactor{src: &chunks{parts: []string{"body"}}, secret: []byte("x"), mask: '*', atEOF: func() { ran = true }}
	out, _ := io.ReadAll(r)
	if !ran || !bytes.Equal(out, []byte("body")) {
		t.Errorf("atEOF ran %v, out %q", ran, out)
	}
}
