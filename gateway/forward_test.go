package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// plainUpstream serves plain HTTP on 127.0.0.7 as plain.example.test and
// remembers the last request it got.
type plainUpstream struct {
	port uint16

	mu   sync.Mutex
	last *http.Request
	body string
}

func startPlainUpstream(e *env) *plainUpstream {
	u := &plainUpstream{}
	u.port = e.httpUpstream("127.0.0.7", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.last, u.body = r, string(body)
		u.mu.Unlock()
		_, _ = io.WriteString(w, "plain hello")
	}))
	e.dns.set("plain.example.test", "127.0.0.7")
	return u
}

func (u *plainUpstream) lastRequest() (*http.Request, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last, u.body
}

func TestForwardCarriesPlainHTTP(t *testing.T) {
	w := newWorld(t)
	up := startPlainUpstream(w.env)
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(up.port, "plain.example.test")}})
	// A proxy URL with a user makes the client send Proxy-Authorization.
	client := w.clientVia(alice, http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword("sbx", "proxy-pass"), Host: w.addr}))

	target := fmt.Sprintf("http://plain.example.test:%d/simple?token=querysecret", up.port)
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader("12345"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "hop-by-hop")
	req.Header.Set("X-Keep", "end-to-end")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK || body != "plain hello" {
		t.Fatalf("%s %q", resp.Status, body)
	}
	got, body := up.lastRequest()
	if got.Host != hostPortOf("plain.example.test", up.port) || got.RequestURI != "/simple?token=querysecret" || body != "12345" {
		t.Errorf("upstream got Host %q, %s, body %q", got.Host, got.RequestURI, body)
	}
	for _, h := range []string{"Proxy-Authorization", "X-Hop"} {
		if v := got.Header.Get(h); v != "" {
			t.Errorf("upstream got %s: %s", h, v)
		}
	}
	if got.Header.Get("X-Keep") != "end-to-end" {
		t.Errorf("upstream lacks X-Keep: %v", got.Header)
	}

	line := w.logs.waitLine(t, `"kind"="http"`, `"verdict"="allowed"`)
	if !containsAll(line, `"host"="plain.example.test"`, `"bytesUp"=5 "bytesDown"=11`) {
		t.Errorf("log line %s", line)
	}
	for _, l := range w.logs.all() {
		if strings.Contains(l, "querysecret") || strings.Contains(l, "proxy-pass") {
			t.Errorf("log line carries the query or the proxy credential: %s", l)
		}
	}
	if got := metricValue(t, w.gw.metrics.requests.WithLabelValues(kindHTTP, verdictAllowed)); got != 1 {
		t.Errorf("requests_total{http,allowed} = %v, want 1", got)
	}
}

// A forwarded response still arriving follows its sandbox's rules as they
// change, as an open tunnel does (ruleChanges).
func TestForwardCutsResponsesTheRulesNoLongerAllow(t *testing.T) {
	for name, tc := range ruleChanges("download.example.test", "127.0.0.7") {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			release := make(chan struct{})
			port := w.httpUpstream("127.0.0.7", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(rw, "one\n")
				rw.(http.Flusher).Flush()
				select {
				case <-release:
					_, _ = io.WriteString(rw, "two\n")
				case <-r.Context().Done():
				}
			}))
			w.dns.set("download.example.test", "127.0.0.7")
			w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{hostsRule(port, "download.example.test")}})
			resp, err := w.proxyClient(alice).Get(fmt.Sprintf("http://download.example.test:%d/", port))
			if err != nil {
				t.Fatal(err)
			}
			var logParts []string
			if tc.detail != "" {
				logParts = []string{`"kind"="http"`, `"verdict"="refused"`, `"reason"="revoked"`,
					fmt.Sprintf(`"detail"="the request to download.example.test:%d was cut short: %s"`, port, tc.detail)}
			}
			w.followStream(t, resp, func() { tc.change(w, port) }, func() { close(release) }, logParts...)
		})
	}
}

func TestForwardRefusals(t *testing.T) {
	w := newWorld(t)
	up := startPlainUpstream(w.env)
	w.dns.set("internal.example.test", "10.1.2.3")
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{
		hostsRule(up.port, "plain.example.test", "internal.example.test"),
	}})
	for _, c := range []struct {
		src, url string
		status   int
		message  string
	}{
		{alice, "http://evil.example.test/", http.StatusForbidden,
			"host evil.example.test:80 is not in sandbox alice's egress allow-list; a template's network.egress[].hosts allows it"},
		{alice, fmt.Sprintf("http://internal.example.test:%d/", up.port), http.StatusForbidden,
			"internal.example.test resolves to 10.1.2.3, inside 10.0.0.0/8, which the gateway refuses unless a cidr rule allows it"},
		{alice, fmt.Sprintf("http://127.0.0.7:%d/", up.port), http.StatusForbidden,
			fmt.Sprintf("IP address 127.0.0.7:%d is refused: name the host instead (a template's network.egress[].hosts allows names), "+
				"or allow the address with a cidr rule (network.egress[].cidr)", up.port)},
		{unknown, fmt.Sprintf("http://plain.example.test:%d/", up.port), http.StatusForbidden,
			"127.0.0.4 is not a sandbox this gateway knows; only sandbox pods, from their own address, may use it"},
	} {
		resp, err := w.proxyClient(c.src).Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != c.status || body != messagePrefix+c.message+"\n" {
			t.Errorf("%s from %s: %s\n%q, want %d\n%q", c.url, c.src, resp.Status, body, c.status, messagePrefix+c.message+"\n")
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", c.url, ct)
		}
	}
	if last, _ := up.lastRequest(); last != nil {
		t.Errorf("a refused request reached the upstream: %s %s", last.Method, last.RequestURI)
	}
	if got := metricValue(t, w.gw.metrics.requests.WithLabelValues(kindHTTP, verdictRefused)); got != 4 {
		t.Errorf("requests_total{http,refused} = %v, want 4", got)
	}
}

func TestOriginFormRequests(t *testing.T) {
	w := newWorld(t)
	w.sandbox(alice, "alice", v1.Network{})

	// Probes need no sandbox.
	resp, err := w.directClient(unknown).Get("http://" + w.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %s %q", resp.Status, body)
	}

	resp, err = w.directClient(alice).Get("http://" + w.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(body, messagePrefix+"this is an HTTP(S) proxy") ||
		!strings.Contains(body, "/endpoints/NAME/") {
		t.Errorf("GET /: %s %q", resp.Status, body)
	}
}
