package wire_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	big := bytes.Repeat([]byte{0xff}, wire.MaxPayload)
	for _, f := range []struct {
		t wire.FrameType
		p []byte
	}{{wire.FrameStdout, []byte("hello")}, {wire.FrameEnd, nil}, {wire.FrameData, big}} {
		if err := wire.WriteFrame(&buf, f.t, f.p); err != nil {
			t.Fatal(err)
		}
		typ, payload, err := wire.ReadFrame(&buf)
		if err != nil || typ != f.t || !bytes.Equal(payload, f.p) {
			t.Errorf("frame %d of %d bytes came back as %d of %d bytes, %v", f.t, len(f.p), typ, len(payload), err)
		}
	}
	if err := wire.WriteFrame(&buf, wire.FrameData, append(big, 0)); err == nil {
		t.Error("a frame larger than MaxPayload was written")
	}
}

func TestReadFrameRefusesWhatNoWriterWrites(t *testing.T) {
	header := func(typ byte, n uint32) []byte {
		b := []byte{typ, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], n)
		return b
	}
	for name, tc := range map[string]struct {
		in   []byte
		want error
	}{
		"type zero":            {header(0, 0), wire.ErrMalformed},
		"unknown type":         {header(200, 0), wire.ErrMalformed},
		"huge length":          {header(byte(wire.FrameData), 1<<31), wire.ErrMalformed},
		"payload cut short":    {append(header(byte(wire.FrameData), 10), 1, 2), io.ErrUnexpectedEOF},
		"header cut short":     {[]byte{1, 0}, io.ErrUnexpectedEOF},
		"nothing: a clean end": {nil, io.EOF},
	} {
		if _, _, err := wire.ReadFrame(bytes.NewReader(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

func TestGreetings(t *testing.T) {
	var buf bytes.Buffer
	if err := wire.Greet(&buf, wire.RoleAgent); err != nil {
		t.Fatal(err)
	}
	if err := wire.ReadGreeting(bufio.NewReader(&buf), wire.RoleAgent); err != nil {
		t.Errorf("own greeting refused: %v", err)
	}
	for in, want := range map[string]string{
		wire.RoleAgent + " 2\n":   "this client is older",
		wire.RoleAgent + " 0\n":   "the agent is older",
		wire.RoleSession + " 1\n": "expected the greeting of an agentsandbox-agent",
		wire.RoleAgent + " x\n":   "no version number",
		strings.Repeat("a", 100):  "longer than",
		wire.RoleAgent:            "cut short",
		"":                        "no greeting",
	} {
		err := wire.ReadGreeting(bufio.NewReader(strings.NewReader(in)), wire.RoleAgent)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("greeting %q: %v, want %q", in, err, want)
		}
	}
}

// FuzzReadFrame feeds the decoder arbitrary bytes: it never panics, never
// returns a payload over MaxPayload, and what it accepts re-encodes to the
// bytes it read.
func FuzzReadFrame(f *testing.F) {
	var seed bytes.Buffer
	_ = wire.WriteFrame(&seed, wire.FrameRequest, []byte(`{"op":"run","command":["true"]}`))
	f.Add(seed.Bytes())
	f.Add([]byte{7, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			typ, payload, err := wire.ReadFrame(r)
			if err != nil {
				return
			}
			if len(payload) > wire.MaxPayload {
				t.Fatalf("payload of %d bytes", len(payload))
			}
			var again bytes.Buffer
			if err := wire.WriteFrame(&again, typ, payload); err != nil {
				t.Fatalf("an accepted frame does not re-encode: %v", err)
			}
			var req wire.Request
			_ = wire.ReadJSON(bytes.NewReader(again.Bytes()), wire.FrameRequest, &req)
		}
	})
}
