// Package ssetest reads a Server-Sent Events stream (the Sandboxes page's
// live updates) for tests and benchmarks: each event with the moment it
// arrived, so a benchmark can time a change reaching an open page.
package ssetest

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Event is one event of the stream.
type Event struct {
	// Name is the event's field ("message" when it has none), Data its
	// data lines joined by newlines.
	Name, Data string
	// Size is the bytes of its lines on the wire, without the line ends.
	Size int
	// At is when its last line was read.
	At time.Time
}

// Stream is an open stream, read in the background until the test ends.
type Stream struct {
	events chan Event
	// ended is closed when the stream ends or fails; closed, when the test
	// is done with it, so a reader no one reads from any more returns.
	ended, closed chan struct{}
}

// Open requests url and reads its events as they come; it fails the test
// unless the answer is 200 OK. The stream is closed when the test ends.
func Open(tb testing.TB, url string) *Stream {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		tb.Fatalf("GET %s: %s", url, resp.Status)
	}
	s := &Stream{events: make(chan Event, 1024), ended: make(chan struct{}), closed: make(chan struct{})}
	tb.Cleanup(func() { close(s.closed); cancel(); resp.Body.Close() })
	go s.read(resp)
	return s
}

func (s *Stream) read(resp *http.Response) {
	defer close(s.ended)
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 4<<20)
	var ev Event
	var data []string
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "":
			if data != nil {
				ev.Data, ev.At = strings.Join(data, "\n"), time.Now()
				if ev.Name == "" {
					ev.Name = "message"
				}
				select {
				case s.events <- ev:
				case <-s.closed:
					return
				}
			}
			ev, data = Event{}, nil
			continue
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
		ev.Size += len(line)
	}
}

// Next returns the next event named name, skipping others; it fails the
// test when none comes within timeout or the stream ends first.
func (s *Stream) Next(tb testing.TB, name string, timeout time.Duration) Event {
	tb.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-s.events:
			if ev.Name == name {
				return ev
			}
		case <-s.ended:
			for _, ev := range s.Drain() { // read before it ended
				if ev.Name == name {
					return ev
				}
			}
			tb.Fatalf("the stream ended before a %s event", name)
		case <-deadline:
			tb.Fatalf("no %s event in %s", name, timeout)
		}
	}
}

// During returns every event that arrives within d.
func (s *Stream) During(d time.Duration) []Event {
	var out []Event
	deadline := time.After(d)
	for {
		select {
		case ev := <-s.events:
			out = append(out, ev)
		case <-deadline:
			return out
		}
	}
}

// Drain returns the events already read and not yet taken, without
// waiting.
func (s *Stream) Drain() []Event {
	var out []Event
	for {
		select {
		case ev := <-s.events:
			out = append(out, ev)
		default:
			return out
		}
	}
}
