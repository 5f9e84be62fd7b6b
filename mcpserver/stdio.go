package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC 2.0's error codes for a message that is not one.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// StdioTransport is the MCP transport over in and out (the process's stdin
// and stdout) that survives what an agent sends by mistake. The go-sdk's
// own ends the session on the first line that is not a JSON-RPC 2.0
// message, and with it every sandbox the agent was driving; here such a
// line is answered with JSON-RPC's error (-32700 for one that is not JSON,
// -32600 for one that is not a request, a notification or a response; a
// batch, which MCP no longer has, is one) and the session goes on. Lines
// over mcp.DefaultMaxLineLength are answered -32700 too.
func StdioTransport(in io.Reader, out io.WriteCloser) mcp.Transport {
	w := &lineWriter{w: out}
	r, pipe := io.Pipe()
	go func() { _ = pipe.CloseWithError(filterMessages(in, pipe, w)) }()
	return &mcp.IOTransport{Reader: r, Writer: w}
}

// filterMessages copies the JSON-RPC messages of in to valid, a line each,
// and answers every other line on answers.
func filterMessages(in io.Reader, valid io.Writer, answers *lineWriter) error {
	br := bufio.NewReaderSize(in, 64*1024)
	for {
		line, tooLong, err := readLine(br, mcp.DefaultMaxLineLength)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			if problem := invalidMessage(line, tooLong); problem != nil {
				if werr := answers.writeLine(problem); werr != nil {
					return werr
				}
			} else if _, werr := valid.Write(append(line, '\n')); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readLine reads one line without its newline; a line longer than limit is
// read to its end and dropped (tooLong).
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			tooLong = len(line) > limit
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if tooLong {
				line = nil
			}
			return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
		}
	}
}

// invalidMessage is the error answer to line, or nil when line is a
// JSON-RPC 2.0 message the session can take.
func invalidMessage(line []byte, tooLong bool) []byte {
	if tooLong {
		return errorAnswer(nil, codeParseError, fmt.Sprintf("parse error: the line is longer than %d bytes", mcp.DefaultMaxLineLength))
	}
	trimmed := bytes.TrimSpace(line)
	if !json.Valid(trimmed) {
		return errorAnswer(nil, codeParseError, "parse error: the line is not JSON")
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &msg); err != nil {
		if trimmed[0] == '[' {
			return errorAnswer(nil, codeInvalidRequest, "invalid request: batches are not supported; send one message a line")
		}
		return errorAnswer(nil, codeInvalidRequest, "invalid request: a message is a JSON object")
	}
	id, hasID := msg["id"]
	if hasID && !validID(id) {
		return errorAnswer(nil, codeInvalidRequest, "invalid request: id must be a string, a number or null")
	}
	var version string
	if err := json.Unmarshal(msg["jsonrpc"], &version); err != nil || version != "2.0" {
		return errorAnswer(id, codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	_, isResult := msg["result"]
	_, isError := msg["error"]
	var method string
	switch {
	case json.Unmarshal(msg["method"], &method) == nil && method != "":
	case hasID && (isResult || isError):
	default:
		return errorAnswer(id, codeInvalidRequest, `invalid request: a request or notification needs a "method", a response an "id" and a "result" or an "error"`)
	}
	return nil
}

// validID: JSON-RPC ids are strings, numbers or null.
func validID(id json.RawMessage) bool {
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return false
	}
	switch v.(type) {
	case string, float64, nil:
		return true
	}
	return false
}

// errorResponse is a JSON-RPC error response.
type errorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcError        `json:"error"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// errorAnswer is the error response to id (null when unknown).
func errorAnswer(id json.RawMessage, code int, message string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	answer, _ := json.Marshal(errorResponse{JSONRPC: "2.0", ID: id, Error: rpcError{Code: code, Message: message}})
	return answer
}

// lineWriter writes whole lines, so the filter's answers never land inside
// one of the session's messages (the go-sdk writes each in one Write).
type lineWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lineWriter) writeLine(p []byte) error {
	_, err := l.Write(append(p, '\n'))
	return err
}

func (l *lineWriter) Close() error { return l.w.Close() }
