package webui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// settle gathers a burst of changes (a warm pool topping up touches many
// objects) into one render.
const settle = 100 * time.Millisecond

// recheck re-renders without a change, for what time alone changes: a
// reconciler that stopped renewing its lease sends no event. The sandboxes
// are not rendered again for it: their times are relative in the browser.
const recheck = 5 * time.Second

// events streams what changes on the page as Server-Sent Events, for the
// view of the stream's query (sandboxView): a "section" event with a
// section's id and HTML when it differs from what this stream last sent,
// and a "rows" event with the view's rows in order and the HTML of those
// that changed. A change renders only what reads the kinds that changed,
// from the watch cache; a change to one sandbox sends its row alone.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	view, err := parseView(r.URL.Query())
	if err != nil {
		http.Error(w, "this stream's query: "+err.Error(), http.StatusBadRequest)
		return
	}
	sub, cancel := s.hub.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	// Reconnect quickly after the server restarts.
	_, _ = fmt.Fprint(w, "retry: 1000\n\n")
	flusher.Flush()

	st := &streamState{sections: map[string]string{}, rows: map[string]string{}}
	ticker := time.NewTicker(recheck)
	defer ticker.Stop()
	what := allParts
	for {
		if err := s.sendChanged(w, r, view, what, st); err != nil {
			_, _ = fmt.Fprintf(w, "event: failure\ndata: %s\n\n", jsonString(err.Error()))
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-ticker.C:
			what = parts{rest: true}
		case <-sub.signal:
			select {
			case <-time.After(settle):
			case <-r.Context().Done():
				return
			}
			what = partsOf(sub.take())
		}
	}
}

// partsOf is what reads the kinds that changed: the sandboxes' rows read
// sandboxes and warm pools (a pool's template is a filter), the rest reads
// every kind but sandboxes.
func partsOf(changed map[string]bool) parts {
	if changed[everyKind] {
		return allParts
	}
	var p parts
	for kind := range changed {
		p.sandboxes = p.sandboxes || kind == kindSandboxes || kind == kindWarmPools
		p.rest = p.rest || kind != kindSandboxes
	}
	return p
}

// streamState is what a stream last sent.
type streamState struct {
	sections map[string]string
	// order and rows are the sandboxes' rows, in order, and each one's
	// HTML by sandbox name.
	order []string
	rows  map[string]string
}

// rowsEvent is the sandboxes' rows: every name in order, and the HTML of
// the rows that are new or changed.
type rowsEvent struct {
	Order   []string          `json:"order"`
	Changed map[string]string `json:"changed"`
}

// sendChanged renders what reads the changed kinds and writes what
// differs from what the stream last sent.
func (s *Server) sendChanged(w http.ResponseWriter, r *http.Request, view sandboxView, what parts, st *streamState) error {
	snap, err := s.snapshot(r.Context(), view, what)
	if err != nil {
		return err
	}
	var sections []section
	if what.rest {
		if sections, err = s.sections(snap); err != nil {
			return err
		}
	}
	if what.sandboxes {
		frame, err := s.render("sandbox-frame", snap)
		if err != nil {
			return err
		}
		sections = append(sections, section{ID: "sandbox-frame", HTML: frame})
		if err := s.sendRows(w, snap, st); err != nil {
			return err
		}
	}
	for _, sec := range sections {
		if st.sections[sec.ID] == sec.HTML {
			continue
		}
		if err := writeEvent(w, "section", sec); err != nil {
			return err
		}
		st.sections[sec.ID] = sec.HTML
	}
	return nil
}

// sendRows writes the rows event when the page's rows or their order
// changed.
func (s *Server) sendRows(w http.ResponseWriter, snap *snapshot, st *streamState) error {
	ev := rowsEvent{Order: make([]string, 0, len(snap.Sandboxes.Rows)), Changed: map[string]string{}}
	rows := make(map[string]string, len(snap.Sandboxes.Rows))
	for _, row := range snap.Sandboxes.Rows {
		html, err := s.render("sandbox-row", rowData{row, snap.Terminal})
		if err != nil {
			return err
		}
		ev.Order = append(ev.Order, row.Name)
		rows[row.Name] = html
		if st.rows[row.Name] != html {
			ev.Changed[row.Name] = html
		}
	}
	if len(ev.Changed) == 0 && slices.Equal(ev.Order, st.order) {
		return nil
	}
	if err := writeEvent(w, "rows", ev); err != nil {
		return err
	}
	st.order, st.rows = ev.Order, rows
	return nil
}

// writeEvent writes one Server-Sent Event of data as JSON.
func writeEvent(w http.ResponseWriter, name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	return err
}

func jsonString(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}
