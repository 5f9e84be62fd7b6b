package webui

import (
	"crypto/subtle"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// contentSecurityPolicy runs no script but the page's own files, connects
// nowhere but back to this server, and lets no other site frame the page.
// Styles may be inline because the terminal emulator (xterm.js) writes its
// measurements and colours into <style> elements at run time and has no
// nonce hook; a style cannot run code.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self'; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// csrfHeader carries the CSRF token on every state-changing request; the
// terminal's WebSocket, which a browser cannot give headers, carries it as
// the csrf query parameter.
const csrfHeader = "X-CSRF-Token"

// ServeHTTP answers a request after the checks that keep other sites and
// other host names from acting with the user's identity.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	header := w.Header()
	header.Set("Content-Security-Policy", contentSecurityPolicy)
	header.Set("X-Content-Type-Options", "nosniff")
	header.Set("X-Frame-Options", "DENY")
	header.Set("Referrer-Policy", "no-referrer")
	header.Set("Cross-Origin-Opener-Policy", "same-origin")
	header.Set("Cross-Origin-Resource-Policy", "same-origin")
	header.Set("Cache-Control", "no-store")
	// A page of another site that resolves its own name to 127.0.0.1 (DNS
	// rebinding) sends its own name as Host: refused before anything else.
	if s.hosts != nil && !s.hosts[r.Host] {
		http.Error(w, "this page answers only to "+hostList(s.hosts)+", not "+r.Host, http.StatusMisdirectedRequest)
		return
	}
	if changesState(r) {
		if reason := s.refuseCrossSite(r); reason != "" {
			writeError(w, http.StatusForbidden, reason)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// changesState is true for every request that acts on the cluster: the
// POST and DELETE actions, and the terminal, which runs commands.
func changesState(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return true
	}
	return strings.HasPrefix(r.URL.Path, "/api/sandboxes/") && strings.HasSuffix(r.URL.Path, "/terminal")
}

// refuseCrossSite says why a state-changing request is refused, or "" to
// let it through: it must come from this server's own origin (a browser
// always sends Origin on these) and carry the CSRF token the page holds.
func (s *Server) refuseCrossSite(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "refused: the request has no Origin header; actions are taken only from the page itself"
	}
	if u, err := url.Parse(origin); err != nil || u.Host != r.Host || u.Scheme != "http" {
		return "refused: a request from " + origin + " may not act here; only this page's own origin (http://" + r.Host + ") may"
	}
	token := r.Header.Get(csrfHeader)
	if token == "" {
		token = r.URL.Query().Get("csrf")
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.csrf)) != 1 {
		return "refused: missing or wrong CSRF token; reload the page (the token changes when agentsandbox ui restarts)"
	}
	return ""
}

func hostList(hosts map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(hosts)), " or ")
}
