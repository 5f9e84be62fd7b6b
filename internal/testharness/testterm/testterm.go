// Package testterm is what the tests of remote terminals share: a command
// that reports its terminal's size as it changes and echoes what is typed,
// and a screen that collects what the terminal shows.
package testterm

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// ResizeScript prints the terminal's size once it is known, echoes a
// typed line, and prints the size again once it changed from 30x100.
// Sizes reach the remote terminal concurrently with the command (and late
// on a busy machine): it waits up to 10s for each change. It lingers a
// second at the end: kwok closes the terminal as soon as the command exits,
// dropping output it has not copied yet.
const ResizeScript = `wait_size() { i=0; while [ "$(stty size)" = "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; stty size; }
wait_size "0 0"; read line; echo "typed $line"; wait_size "30 100"; sleep 1`

// Screen collects what a terminal shows: write the terminal's output to
// it, from any goroutine.
type Screen struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (s *Screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *Screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// Wait waits until the screen shows text, and fails the test if it does
// not within a minute.
func (s *Screen) Wait(t testing.TB, text string) {
	t.Helper()
	testcluster.Eventually(t, fmt.Sprintf("%q on the terminal", text), func() (bool, string) {
		return strings.Contains(s.String(), text), s.String()
	})
}
