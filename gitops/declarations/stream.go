package declarations

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// document is one YAML document of a file: its text, with everything before
// its content blanked out (a "--- " marker, say) so columns still match the
// file, and the line of the file its text starts on.
type document struct {
	text []byte
	line int
	// empty: no content at all (a comment-only document, or "---" twice).
	empty bool
	// keys counts the top-level fields the stream decoder read, -1 when
	// the document is not a mapping.
	keys int
}

// syntaxError is a YAML stream that does not parse; doc counts from 1.
type syntaxError struct {
	doc  int
	line int
	msg  string
}

func (e *syntaxError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("document %d: invalid YAML: line %d: %s", e.doc, e.line, e.msg)
	}
	return fmt.Sprintf("document %d: invalid YAML: %s", e.doc, e.msg)
}

// splitDocuments cuts a YAML stream into documents with a YAML stream
// decoder, so every way YAML can start or end a document ("---" alone or
// followed by content, "...", directives) is read as YAML reads it: a
// document a line-based split missed would be silently left out of the
// sync, and its object pruned. What the decoder cannot read is refused.
func splitDocuments(data []byte) ([]document, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var nodes []*yamlv3.Node
	for {
		n := &yamlv3.Node{}
		err := dec.Decode(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			from := 1
			if len(nodes) > 0 {
				from = nodes[len(nodes)-1].Line
			}
			return nil, syntaxErrorAt(data, from, len(nodes)+1, err)
		}
		nodes = append(nodes, n)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	docs := make([]document, len(nodes))
	for i, n := range nodes {
		end := len(lines)
		if i+1 < len(nodes) {
			end = nodes[i+1].Line - 1
		}
		docs[i] = documentText(lines, n, end)
		// Duplicate keys, which YAML-to-JSON conversion would resolve by
		// silently keeping the last, are refused; the node's lines are
		// the file's.
		var v any
		if err := n.Decode(&v); err != nil {
			msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
			return nil, fmt.Errorf("document %d: invalid YAML: %s", i+1, strings.TrimSpace(msg))
		}
		docs[i].keys = -1
		switch m := v.(type) {
		case map[string]any:
			docs[i].keys = len(m)
		case map[any]any:
			docs[i].keys = len(m)
		}
	}
	return docs, nil
}

// documentText is the text of document node n, which ends at line end.
func documentText(lines [][]byte, n *yamlv3.Node, end int) document {
	if len(n.Content) == 0 || isEmpty(n.Content[0]) {
		return document{line: n.Line, empty: true}
	}
	content := n.Content[0]
	start := content.Line
	// A node's properties (an anchor, a tag) come before the node itself.
	if content.Anchor != "" || (content.Style&yamlv3.TaggedStyle) != 0 {
		start = n.Line
	}
	var text []byte
	for i := start; i <= end && i <= len(lines); i++ {
		l := lines[i-1]
		if i == start && start == content.Line {
			l = blankBefore(l, content.Column)
		}
		text = append(text, l...)
	}
	return document{text: text, line: start}
}

// isEmpty: a document whose only content is the null YAML gives one
// that has nothing in it.
func isEmpty(n *yamlv3.Node) bool {
	return n.Kind == yamlv3.ScalarNode && n.Tag == "!!null" && n.Value == ""
}

// blankBefore replaces what comes before column (1-based, in characters) of
// a line with spaces: a "--- " marker before the document's content.
func blankBefore(line []byte, column int) []byte {
	out := []byte(strings.Repeat(" ", column-1))
	runes := []rune(string(line))
	if column-1 > len(runes) {
		return line
	}
	return append(out, string(runes[column-1:])...)
}

// yamlLine finds a line number in a YAML error message.
var yamlLine = regexp.MustCompile(`line (\d+): `)

// syntaxErrorAt finds the line a YAML syntax error is on. The decoder's own
// line is the line of the construct it was parsing, counted from 0, which
// points a line or more above the mistake; the first prefix of the stream
// (from line from on) that fails with the same message ends on the line the
// parser could not read. When the prefixes before it fail too, back to some
// line, what was opened on that line never closed (a "[" without its "]"),
// and the error says so.
func syntaxErrorAt(data []byte, from, doc int, err error) error {
	msg := message(err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	var prefix []byte
	failingSince := 0
	// Each prefix is parsed whole: bounded, so a huge broken file costs
	// seconds, not hours, of the reconciler's time.
	for i := from; i <= len(lines) && i < from+maxScannedLines; i++ {
		prefix = append(prefix, lines[i-1]...)
		err := parses(prefix)
		switch {
		case err == nil:
			failingSince = 0
			continue
		case failingSince == 0:
			failingSince = i
		}
		if message(err) == msg {
			if failingSince < i {
				msg = fmt.Sprintf("%s (reading what opens on line %d)", msg, failingSince)
			}
			return &syntaxError{doc: doc, line: i, msg: msg}
		}
	}
	// Not reproduced by any prefix: the decoder's line is all there is.
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &syntaxError{doc: doc, line: n + 1, msg: msg}
	}
	return &syntaxError{doc: doc, msg: msg}
}

// maxScannedLines bounds the prefixes syntaxErrorAt parses.
const maxScannedLines = 2000

// message is a YAML error without its "yaml: " and "line N: " prefixes.
func message(err error) string {
	return yamlLine.ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: "), "")
}

// parses decodes a whole stream, returning its first error.
func parses(stream []byte) error {
	dec := yamlv3.NewDecoder(bytes.NewReader(stream))
	for {
		var n yamlv3.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}
