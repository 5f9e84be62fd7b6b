package webui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// settle gathers a burst of changes (a warm pool topping up touches many
// objects) into one render.
const settle = 100 * time.Millisecond

// recheck re-renders without a change, for what time alone changes: a
// reconciler that stopped renewing its lease sends no event.
const recheck = 5 * time.Second

// events streams the page's sections as Server-Sent Events: each time a
// section's HTML differs from what this stream last sent, one "section"
// event with its id and HTML. The renders read the watch cache only.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	mine := r.URL.Query().Get("view") != "all"
	changes, cancel := s.hub.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	// Reconnect quickly after the server restarts.
	_, _ = fmt.Fprint(w, "retry: 1000\n\n")
	flusher.Flush()

	sent := map[string]string{}
	ticker := time.NewTicker(recheck)
	defer ticker.Stop()
	for {
		if err := s.sendChanged(w, r, mine, sent); err != nil {
			_, _ = fmt.Fprintf(w, "event: failure\ndata: %s\n\n", jsonString(err.Error()))
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-ticker.C:
		case <-changes:
			select {
			case <-time.After(settle):
			case <-r.Context().Done():
				return
			}
		}
	}
}

// sendChanged renders every section and writes those that changed since
// they were last sent on this stream.
func (s *Server) sendChanged(w http.ResponseWriter, r *http.Request, mine bool, sent map[string]string) error {
	snap, err := s.snapshot(r.Context(), mine)
	if err != nil {
		return err
	}
	sections, err := s.sections(snap)
	if err != nil {
		return err
	}
	for _, sec := range sections {
		if sent[sec.ID] == sec.HTML {
			continue
		}
		data, err := json.Marshal(sec)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: section\ndata: %s\n\n", data); err != nil {
			return err
		}
		sent[sec.ID] = sec.HTML
	}
	return nil
}

func jsonString(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}
