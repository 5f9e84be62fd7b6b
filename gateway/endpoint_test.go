package gateway

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

const (
	llmSecret    = "sk-test-0123456789abcdef"
	searchSecret = "search-secret-42"
)

// apiUpstream is an HTTPS upstream for endpoints at api.example.test
// (127.0.0.5) that echoes what it is sent, as httpbin's /headers does, and
// remembers the credentials it saw.
type apiUpstream struct {
	port    uint16
	release chan struct{} // lets /v1/stream send its second event
	once    sync.Once

	mu      sync.Mutex
	seen    []*http.Request
	gzipped bool
}

func startAPIUpstream(e *env) *apiUpstream {
	u := &apiUpstream{release: make(chan struct{})}
	e.t.Cleanup(u.releaseStream)
	mux := http.NewServeMux()
	echo := func(w http.ResponseWriter, r *http.Request) {
		u.note(r)
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		// Echo in 7-byte writes, each flushed: the secrets arrive split
		// across writes.
		text := echoHeaders(r)
		for len(text) > 0 {
			n := min(7, len(text))
			_, _ = io.WriteString(w, text[:n])
			w.(http.Flusher).Flush()
			text = text[n:]
		}
	}
	mux.HandleFunc("/v1", echo)
	mux.HandleFunc("/v1/", echo)
	mux.HandleFunc("/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one "+r.Header.Get("Authorization")+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-u.release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	mux.HandleFunc("/v1/gzip", func(w http.ResponseWriter, r *http.Request) {
		u.note(r)
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = io.WriteString(w, echoHeaders(r))
			return
		}
		u.mu.Lock()
		u.gzipped = true
		u.mu.Unlock()
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, echoHeaders(r))
		_ = zw.Close()
	})
	mux.HandleFunc("/v1/brotli", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		_, _ = io.WriteString(w, "not really brotli: "+r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/v1/early", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css?key="+r.Header.Get("Authorization")+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		_, _ = io.WriteString(w, "final")
	})
	mux.HandleFunc("/v1/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Echo")
		_, _ = io.WriteString(w, "body first")
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	})
	u.port = e.httpsUpstream("127.0.0.5", mux, "api.example.test", "model.internal.test")
	e.dns.set("api.example.test", "127.0.0.5")
	// An endpoint in a blocked range, such as a model served in the
	// cluster: the test's dial reaches it on loopback.
	e.dns.set("model.internal.test", "10.1.2.3")
	e.redirectDial(hostPortOf("10.1.2.3", u.port), hostPortOf("127.0.0.5", u.port))
	return u
}

func (u *apiUpstream) note(r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen = append(u.seen, r)
}

func (u *apiUpstream) last() *http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		return nil
	}
	return u.seen[len(u.seen)-1]
}

func (u *apiUpstream) releaseStream() { u.once.Do(func() { close(u.release) }) }

// echoHeaders writes a request's path, query and headers, one a line.
func echoHeaders(r *http.Request) string {
	lines := []string{"RequestURI: " + r.RequestURI}
	for name, values := range r.Header {
		for _, v := range values {
			lines = append(lines, name+": "+v)
		}
	}
	sort.Strings(lines[1:])
	return strings.Join(lines, "\n") + "\n"
}

// endpointWorld is an env whose sandbox alice has endpoints on the api
// upstream and no egress rules at all: endpoints need none.
func endpointWorld(t *testing.T) (*env, *apiUpstream) {
	e := newEnv(t)
	up := startAPIUpstream(e)
	// An upstream whose certificate no trusted CA signed.
	untrustedPort := serveTLS(t, "127.0.0.8", http.NotFoundHandler(),
		newTestCA(t).certificate(t, "127.0.0.8", "untrusted.example.test"))
	e.dns.set("untrusted.example.test", "127.0.0.8")

	base := fmt.Sprintf("https://api.example.test:%d/v1", up.port)
	e.secrets.set("llm-key", "token", llmSecret)
	e.secrets.set("search-key", "key", searchSecret)
	e.sandbox(alice, "alice", v1.Network{Endpoints: []v1.Endpoint{
		{Name: "llm", URL: base, Credential: &v1.EndpointCredential{
			SecretRef: v1.SecretKeyReference{Namespace: "agentsandbox-system", Name: "llm-key", Key: "token"}, Prefix: "Bearer "}},
		{Name: "search", URL: base + "/", Credential: &v1.EndpointCredential{
			SecretRef: v1.SecretKeyReference{Name: "search-key", Key: "key"}, Header: "X-Api-Key"}},
		{Name: "broken", URL: base, Credential: &v1.EndpointCredential{
			SecretRef: v1.SecretKeyReference{Namespace: "agentsandbox-system", Name: "gone", Key: "token"}}},
		{Name: "untrusted", URL: fmt.Sprintf("https://untrusted.example.test:%d", untrustedPort)},
		{Name: "model", URL: fmt.Sprintf("https://model.internal.test:%d/v1", up.port)},
	}})
	e.sandbox(bob, "bob", v1.Network{})
	return e, up
}

func mask(secret string) string { return strings.Repeat("*", len(secret)) }

func TestEndpointAddsCredentialAndMasksItsEcho(t *testing.T) {
	e, up := endpointWorld(t)
	client := e.directClient(alice)

	req, _ := http.NewRequest(http.MethodGet, e.endpointURL("llm", "/echo?x=1&q=querysecret"), nil)
	req.Header.Set("Authorization", "Bearer sandbox-own")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	got := up.last()
	if got == nil || got.Header.Get("Authorization") != "Bearer "+llmSecret || got.RequestURI != "/v1/echo?x=1&q=querysecret" {
		t.Fatalf("upstream got %v", got)
	}
	if got.Host != fmt.Sprintf("api.example.test:%d", up.port) {
		t.Errorf("upstream got Host %q", got.Host)
	}
	if resp.StatusCode != http.StatusOK || strings.Contains(body, llmSecret) || !strings.Contains(body, "Authorization: Bearer "+mask(llmSecret)+"\n") {
		t.Errorf("%s, body:\n%s", resp.Status, body)
	}
	if h := resp.Header.Get("X-Echo-Authorization"); h != "Bearer "+mask(llmSecret) {
		t.Errorf("X-Echo-Authorization: %q", h)
	}

	// Another header: only it is replaced; what else the sandbox sends
	// passes, and a trailing slash on the endpoint's URL joins cleanly.
	req, _ = http.NewRequest(http.MethodGet, e.endpointURL("search", "/echo"), nil)
	req.Header.Set("X-Api-Key", "the-sandbox's")
	req.Header.Set("Authorization", "Bearer kept")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body = readBody(t, resp)
	got = up.last()
	if got.Header.Get("X-Api-Key") != searchSecret || got.Header.Get("Authorization") != "Bearer kept" || got.RequestURI != "/v1/echo" {
		t.Errorf("upstream got %s %v", got.RequestURI, got.Header)
	}
	if strings.Contains(body, searchSecret) || !strings.Contains(body, "X-Api-Key: "+mask(searchSecret)) {
		t.Errorf("body:\n%s", body)
	}

	line := e.logs.waitLine(t, `"kind"="endpoint"`, `"endpoint"="search"`)
	if !containsAll(line, `"verdict"="allowed"`, `"host"="api.example.test"`, `"sandbox"="alice"`) {
		t.Errorf("log line %s", line)
	}
	e.logs.waitLine(t, `"endpoint"="llm"`)
	for _, l := range e.logs.all() {
		if strings.Contains(l, llmSecret) || strings.Contains(l, searchSecret) || strings.Contains(l, "querysecret") {
			t.Errorf("log line carries a credential or a query: %s", l)
		}
	}
	if n := metricValue(t, e.gw.metrics.requests.WithLabelValues(kindEndpoint, verdictAllowed)); n != 2 {
		t.Errorf("requests_total{endpoint,allowed} = %v, want 2", n)
	}
}

func TestEndpointStreamsAsTheUpstreamWrites(t *testing.T) {
	e, up := endpointWorld(t)
	resp, err := e.directClient(alice).Get(e.endpointURL("llm", "/stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string)
	go func() {
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(events)
				return
			}
			if line != "\n" {
				events <- line
			}
		}
	}()
	select {
	case first := <-events:
		// The secret ends the event: held back, it would be released
		// only by the next write. Masked, it arrives at once.
		if first != "data: one Bearer "+mask(llmSecret)+"\n" {
			t.Errorf("first event %q", first)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not arrive while the upstream held the second back")
	}
	up.releaseStream()
	if second := <-events; second != "data: two\n" {
		t.Errorf("second event %q", second)
	}
}

// An endpoint's answer still streaming follows its sandbox's declarations as
// they change: it ends once the endpoint is no longer declared (or points
// elsewhere), or the sandbox is gone.
func TestEndpointCutsStreamsNoLongerDeclared(t *testing.T) {
	redeclare := func(e *env, edit func(ep v1.Endpoint) (v1.Endpoint, bool)) {
		c, _ := e.dir.Client(netip.MustParseAddr(alice))
		var kept []v1.Endpoint
		for _, ep := range c.Network.Endpoints {
			if ep, keep := edit(ep); keep {
				kept = append(kept, ep)
			}
		}
		e.sandbox(alice, "alice", v1.Network{Endpoints: kept})
	}
	const cut = "the request to endpoint llm was cut short: "
	for name, tc := range map[string]struct {
		change func(e *env)
		detail string // in the log line of the cut request; "" for one that goes on
	}{
		"endpoint dropped": {
			change: func(e *env) {
				redeclare(e, func(ep v1.Endpoint) (v1.Endpoint, bool) { return ep, ep.Name != "llm" })
			},
			detail: cut + "sandbox alice no longer declares it (or declares it with another URL)",
		},
		"endpoint moved": {
			change: func(e *env) {
				redeclare(e, func(ep v1.Endpoint) (v1.Endpoint, bool) {
					if ep.Name == "llm" {
						ep.URL += "/elsewhere"
					}
					return ep, true
				})
			},
			detail: cut + "sandbox alice no longer declares it (or declares it with another URL)",
		},
		"sandbox gone": {
			change: func(e *env) { e.forget(alice) },
			detail: cut + "no sandbox has address " + alice + " any more",
		},
		"another endpoint dropped": {
			change: func(e *env) {
				redeclare(e, func(ep v1.Endpoint) (v1.Endpoint, bool) { return ep, ep.Name != "search" })
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e, up := endpointWorld(t)
			resp, err := e.directClient(alice).Get(e.endpointURL("llm", "/stream"))
			if err != nil {
				t.Fatal(err)
			}
			var logParts []string
			if tc.detail != "" {
				logParts = []string{`"kind"="endpoint"`, `"verdict"="refused"`, `"reason"="revoked"`, `"detail"="` + tc.detail + `"`}
			}
			e.followStream(t, resp, func() { tc.change(e) }, up.releaseStream, logParts...)
		})
	}
}

func TestEndpointReadsRotatedSecret(t *testing.T) {
	e, up := endpointWorld(t)
	client := e.directClient(alice)
	for _, secret := range []string{"sk-rotate-one-111", "sk-rotate-two-222"} {
		e.secrets.set("llm-key", "token", secret)
		resp, err := client.Get(e.endpointURL("llm", "/echo"))
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if got := up.last().Header.Get("Authorization"); got != "Bearer "+secret {
			t.Errorf("upstream got %q, want the current secret %q", got, secret)
		}
		if strings.Contains(body, secret) || !strings.Contains(body, mask(secret)) {
			t.Errorf("body after rotation to %s:\n%s", secret, body)
		}
	}
}

func TestEndpointMissingListsTheSandboxsEndpoints(t *testing.T) {
	e, _ := endpointWorld(t)
	for _, c := range []struct{ src, message string }{
		{alice, `sandbox alice has no endpoint "nope"; its endpoints: llm, search, broken, untrusted, model`},
		{bob, `sandbox bob has no endpoint "nope": it has no endpoints; a template's network.endpoints declares them`},
	} {
		resp, err := e.directClient(c.src).Get(e.endpointURL("nope", "/v1/models"))
		if err != nil {
			t.Fatal(err)
		}
		if body := readBody(t, resp); resp.StatusCode != http.StatusNotFound || body != messagePrefix+c.message+"\n" {
			t.Errorf("%s: %s %q", c.src, resp.Status, body)
		}
	}
}

func TestEndpointUnreadableSecret(t *testing.T) {
	e, up := endpointWorld(t)
	// The Secrets error's text is not the gateway's to show: here it
	// quotes a value.
	e.secrets.err = errors.New("cannot decode sk-leaky-777")
	resp, err := e.directClient(alice).Get(e.endpointURL("broken", "/echo"))
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	want := messagePrefix + `the credential of endpoint broken could not be read from key "token" of Secret agentsandbox-system/gone; ` +
		"the gateway must be able to read that Secret\n"
	if resp.StatusCode != http.StatusBadGateway || body != want {
		t.Errorf("%s %q, want 502 %q", resp.Status, body, want)
	}
	if strings.Contains(body, "sk-leaky-777") {
		t.Error("the body carries the Secrets error")
	}
	if up.last() != nil {
		t.Error("the request went upstream without its credential")
	}
	e.logs.waitLine(t, `"endpoint"="broken"`, `"reason"="secret-unreadable"`)
}

func TestEndpointDecodesGzipToMaskIt(t *testing.T) {
	e, up := endpointWorld(t)
	client := e.directClient(alice)
	client.Transport.(*http.Transport).DisableCompression = true // to see what arrives as it arrives
	req, _ := http.NewRequest(http.MethodGet, e.endpointURL("llm", "/gzip"), nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	up.mu.Lock()
	gzipped := up.gzipped
	up.mu.Unlock()
	if !gzipped {
		t.Fatal("the upstream did not compress: the test shows nothing")
	}
	if resp.Header.Get("Content-Encoding") != "" || strings.Contains(body, llmSecret) || !strings.Contains(body, mask(llmSecret)) {
		t.Errorf("Content-Encoding %q, body:\n%s", resp.Header.Get("Content-Encoding"), body)
	}
}

func TestEndpointWithholdsEncodingItCannotSearch(t *testing.T) {
	e, _ := endpointWorld(t)
	resp, err := e.directClient(alice).Get(e.endpointURL("llm", "/brotli"))
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, llmSecret) || !strings.Contains(body, "Content-Encoding br") {
		t.Errorf("%s %q", resp.Status, body)
	}
}

func TestEndpointMasksEarlyHintsAndTrailers(t *testing.T) {
	e, _ := endpointWorld(t)
	client := e.directClient(alice)

	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
		hints = append(hints, h.Get("Link"))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, e.endpointURL("llm", "/early"), nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if len(hints) != 1 || strings.Contains(hints[0], llmSecret) || !strings.Contains(hints[0], mask(llmSecret)) {
		t.Errorf("early hints %q", hints)
	}

	resp, err = client.Get(e.endpointURL("llm", "/trailer"))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got := resp.Trailer.Get("X-Echo"); got != "Bearer "+mask(llmSecret) {
		t.Errorf("trailer X-Echo %q", got)
	}
}

func TestEndpointInBlockedRangeIsReached(t *testing.T) {
	// Endpoint URLs are the platform team's: Blocked, which keeps the
	// sandbox's own choices out of the cluster, does not apply to them.
	e, up := endpointWorld(t)
	resp, err := e.directClient(alice).Get(e.endpointURL("model", "/chat"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK || up.last() == nil || up.last().RequestURI != "/v1/chat" {
		t.Errorf("%s %q", resp.Status, body)
	}
}

func TestEndpointVerifiesUpstreamCertificate(t *testing.T) {
	e, _ := endpointWorld(t)
	resp, err := e.directClient(alice).Get(e.endpointURL("untrusted", "/"))
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "endpoint untrusted's upstream https://untrusted.example.test") ||
		!strings.Contains(body, "certificate") {
		t.Errorf("%s %q", resp.Status, body)
	}
}

func TestEndpointPaths(t *testing.T) {
	e, up := endpointWorld(t)
	client := e.directClient(alice)
	for _, rest := range []string{"/../admin", "/%2e%2e/admin", "/a/..%2Fadmin", `/..\admin`} {
		resp, err := client.Get(e.endpointURL("llm", rest))
		if err != nil {
			t.Fatal(err)
		}
		if body := readBody(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, ".. segments") {
			t.Errorf("%s: %s %q", rest, resp.Status, body)
		}
	}
	if up.last() != nil {
		t.Errorf("a climbing path went upstream: %s", up.last().RequestURI)
	}
	// An encoded slash stays encoded; the bare endpoint address is the
	// endpoint's URL itself.
	for rest, want := range map[string]string{"/files/a%2Fb": "/v1/files/a%2Fb", "": "/v1"} {
		resp, err := client.Get(e.endpointURL("llm", rest))
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if got := up.last(); got == nil || got.RequestURI != want {
			t.Errorf("%q went to %v, want %s", rest, got, want)
		}
	}
}
