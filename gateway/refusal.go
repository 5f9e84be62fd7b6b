package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// messagePrefix starts every refusal the sandbox sees, so a user reading
// pip's or curl's output knows which component said no.
const messagePrefix = "agentsandbox egress gateway: "

// Reasons: a refusal's short form, in logs.
const (
	reasonUnknownSource    = "unknown-source"
	reasonNotProxyRequest  = "not-a-proxy-request"
	reasonBadTarget        = "bad-target"
	reasonIPLiteral        = "ip-literal"
	reasonHostNotAllowed   = "host-not-allowed"
	reasonPortNotAllowed   = "port-not-allowed"
	reasonBlockedAddress   = "blocked-address"
	reasonUnresolvable     = "unresolvable"
	reasonUnreachable      = "unreachable"
	reasonSNIMismatch      = "sni-mismatch"
	reasonBadClientHello   = "bad-client-hello"
	reasonNoEndpoint       = "no-such-endpoint"
	reasonBadEndpointURL   = "bad-endpoint-url"
	reasonBadPath          = "bad-path"
	reasonSecretUnreadable = "secret-unreadable"
	reasonUpstreamFailed   = "upstream-failed"
	reasonUnredactable     = "unredactable-response"
	reasonRevoked          = "revoked"
)

// refusal is the gateway's answer when it does not carry a request: the
// status, the reason logs count, and the sentence the sandbox sees. It is
// an error so a Transport's dial can hand it to the proxy's error handler.
type refusal struct {
	status  int
	reason  string
	message string
	// cause is logged, never shown to the sandbox: a Secrets error, say,
	// whose text the gateway does not control.
	cause error
}

func refusef(status int, reason, format string, args ...any) *refusal {
	return &refusal{status: status, reason: reason, message: fmt.Sprintf(format, args...)}
}

func (f *refusal) Error() string { return f.message }

func (f *refusal) body() string { return messagePrefix + f.message + "\n" }

// refuse answers r with f and records it.
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, rec *record, f *refusal) {
	rec.refusal = f
	if r.Method == http.MethodConnect {
		f.writeConnect(w)
		return
	}
	f.write(w)
}

func (f *refusal) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.body())
}

// writeConnect answers a CONNECT with the sentence in the status line as
// well as in the body: clients report a failed tunnel by its status line
// (pip prints "Tunnel connection failed: 403 ...", Go's http.Client the text
// after the code) and drop the body. net/http writes only standard reason
// phrases, so the answer is written on the taken-over connection.
func (f *refusal) writeConnect(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		f.write(w)
		return
	}
	defer conn.Close()
	body := f.body()
	_, _ = fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		f.status, reasonPhrase(body), len(body), body)
}

// reasonPhrase makes text fit a status line: printable ASCII only, so no
// host name or path can end the line early.
func reasonPhrase(text string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return ' '
		}
		return r
	}, strings.TrimSpace(text))
}
