package mcpserver

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestFilterAnswersWhatIsNotAMessage: each line an agent may send by
// mistake gets its JSON-RPC error, with the id when it has a usable one;
// messages pass on unchanged, in order.
func TestFilterAnswersWhatIsNotAMessage(t *testing.T) {
	cases := []struct {
		line string
		// code is the error answered, 0 for a line that passes; id the
		// answer's id.
		code int
		id   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, 0, ""},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":"a","result":{}}`, 0, ""},
		{`not json`, codeParseError, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":`, codeParseError, "null"},
		{`"just a string"`, codeInvalidRequest, "null"},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, codeInvalidRequest, "null"},
		{`{"jsonrpc":"1.0","id":7,"method":"ping"}`, codeInvalidRequest, "7"},
		{`{"id":8,"method":"ping"}`, codeInvalidRequest, "8"},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, codeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":9}`, codeInvalidRequest, "9"},
		{`{"hello":"world"}`, codeInvalidRequest, "null"},
	}
	var in strings.Builder
	var passed []string
	for _, tc := range cases {
		in.WriteString(tc.line + "\n\n") // blank lines are skipped
		if tc.code == 0 {
			passed = append(passed, tc.line)
		}
	}
	var valid, answers bytes.Buffer
	if err := filterMessages(strings.NewReader(in.String()), &valid, &lineWriter{w: nopCloser{&answers}}); err != nil {
		t.Fatal(err)
	}
	if got, want := valid.String(), strings.Join(passed, "\n")+"\n"; got != want {
		t.Errorf("passed on:\n%s\nwant:\n%s", got, want)
	}
	lines := strings.Split(strings.TrimSpace(answers.String()), "\n")
	i := 0
	for _, tc := range cases {
		if tc.code == 0 {
			continue
		}
		if i >= len(lines) {
			t.Fatalf("no answer to %s", tc.line)
		}
		var got errorResponse
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("answer %q: %v", lines[i], err)
		}
		if got.JSONRPC != "2.0" || got.Error.Code != tc.code || string(got.ID) != tc.id || got.Error.Message == "" {
			t.Errorf("answer to %s: %s; want code %d, id %s and a message", tc.line, lines[i], tc.code, tc.id)
		}
		i++
	}
	if i != len(lines) {
		t.Errorf("%d answers for %d bad lines: %v", len(lines), i, lines)
	}
}

// TestFilterAnswersAnOverlongLine and goes on with the next.
func TestFilterAnswersAnOverlongLine(t *testing.T) {
	var valid, answers bytes.Buffer
	in := strings.Repeat("x", 20<<20) + "\n" + `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"
	if err := filterMessages(strings.NewReader(in), &valid, &lineWriter{w: nopCloser{&answers}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answers.String(), `"code":-32700`) || !strings.Contains(valid.String(), `"method":"ping"`) {
		t.Errorf("answers %q, passed %q; want a parse error, then the ping", answers.String()[:min(200, answers.Len())], valid.String())
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }
