// Package httplog sends what net/http's servers log (a TLS handshake that
// failed, a panic in a handler) through a logr.Logger: without it those
// lines go to stderr as plain text, between the JSON lines of everything
// else, where a log pipeline cannot parse or filter them.
package httplog

import (
	"log"
	"strings"

	"github.com/go-logr/logr"
)

// ErrorLog is an http.Server's ErrorLog that logs each line as a message
// of l: net/http's lines describe a caller's mistake as often as a fault
// (a plain HTTP request to a TLS port), so they are logged at Info level.
func ErrorLog(l logr.Logger) *log.Logger {
	return log.New(writer{l}, "", 0)
}

type writer struct{ log logr.Logger }

func (w writer) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
