package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// The actions answer JSON: {"name": ...} when done, {"error": ...} with the
// API server's own words when refused, so the page can show why.

// newSandbox is the form of "New sandbox".
type newSandbox struct {
	// From is "template/NAME" or "pool/NAME".
	From string `json:"from"`
	// Name is optional; empty generates one from the template or pool.
	Name string `json:"name"`
	// Lifetime is a Go duration ("2h"); empty takes the template's.
	Lifetime string `json:"lifetime"`
}

// claimOptions turns the form into a claim, or says which field is wrong
// and what it takes.
func (n newSandbox) claimOptions() (sandboxclient.ClaimOptions, error) {
	var opts sandboxclient.ClaimOptions
	kind, name, ok := strings.Cut(n.From, "/")
	switch {
	case ok && kind == "template" && name != "":
		opts.Template = name
	case ok && kind == "pool" && name != "":
		opts.Pool = name
	default:
		return opts, fmt.Errorf("from %q: choose a template or a warm pool (template/NAME or pool/NAME)", n.From)
	}
	opts.Name = strings.TrimSpace(n.Name)
	if l := strings.TrimSpace(n.Lifetime); l != "" {
		ttl, err := time.ParseDuration(l)
		if err != nil || ttl <= 0 {
			return opts, fmt.Errorf("lifetime %q: not a positive duration; use e.g. 30m, 2h or 1h30m, or leave it empty for the template's", n.Lifetime)
		}
		opts.TTL = ttl
	}
	return opts, nil
}

// create claims a sandbox and answers at once with its name; the page
// follows it to Ready through the events stream.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var form newSandbox
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&form); err != nil {
		writeError(w, http.StatusBadRequest, "the request is not the new-sandbox form as JSON: "+err.Error())
		return
	}
	opts, err := form.claimOptions()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sbx, err := s.sdk.Claim(r.Context(), opts)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"name": sbx.Name})
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, s.sdk.Stop)
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, s.sdk.Start)
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, s.sdk.Delete)
}

// act runs one SDK action on the sandbox the path names.
func (s *Server) act(w http.ResponseWriter, r *http.Request, action func(ctx context.Context, name string) error) {
	name := r.PathValue("name")
	if err := action(r.Context(), name); err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": name})
}

// logTail is how much of a sandbox's log the page shows.
const logTail = 1000

// logs answers the last lines of the sandbox's log as plain text.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	var buf strings.Builder
	if err := s.sdk.Logs(r.Context(), r.PathValue("name"), &buf, sandboxclient.LogOptions{TailLines: logTail}); err != nil {
		writeAPIError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(buf.String()))
}

// writeAPIError answers an SDK error with the status the API server gave
// and its message: a refusal reads as the admission policy wrote it, and
// a claim of what does not exist, or under a name taken, is the user's to
// fix (4xx), not the server's.
func writeAPIError(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	var status apierrors.APIStatus
	var forbidden *sandboxclient.ForbiddenError
	var notReady *sandboxclient.NotReadyError
	var refused *sandboxclient.ClaimRefusedError
	switch {
	case errors.As(err, &refused) && refused.Taken:
		code = http.StatusConflict
	case errors.As(err, &refused):
		code = http.StatusUnprocessableEntity // the form names what is not there
	case sandboxclient.IsNotFound(err):
		code = http.StatusNotFound
	case errors.As(err, &forbidden):
		code = http.StatusForbidden
	case errors.As(err, &notReady):
		code = http.StatusConflict
	case errors.As(err, &status) && status.Status().Code >= 400:
		code = int(status.Status().Code)
	}
	writeError(w, code, err.Error())
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
