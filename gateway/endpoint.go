package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// endpointsPrefix starts the path of endpoint requests, which sandboxes
// send to the gateway itself (AGENTSANDBOX_ENDPOINT_NAME is
// http://<gateway>/endpoints/NAME).
const endpointsPrefix = "/endpoints/"

// defaultCredentialHeader is EndpointCredential.Header's default.
const defaultCredentialHeader = "Authorization"

// serveEndpoint forwards /endpoints/NAME/rest to the endpoint's URL plus
// rest, with the endpoint's credential added and masked in the answer.
func (g *Gateway) serveEndpoint(w http.ResponseWriter, r *http.Request, rec *record) {
	rt, f := findRoute(rec.client, r.URL)
	rec.endpoint = rt.name
	if f != nil {
		g.refuse(w, r, rec, f)
		return
	}
	rec.host, rec.port = rt.target.Hostname(), urlPort(rt.target)
	var cred *credential
	if rt.endpoint.Credential != nil {
		if cred, f = g.credential(r.Context(), rt.name, rt.endpoint.Credential); f != nil {
			g.refuse(w, r, rec, f)
			return
		}
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rt.direct(pr.Out)
			if cred != nil {
				cred.apply(pr.Out)
			}
		},
		Transport: g.endpointTransport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f := refusalOf(r, err)
			if f == nil {
				f = refusef(http.StatusBadGateway, reasonUpstreamFailed, "endpoint %s's upstream %s://%s failed: %v",
					rt.name, rt.target.Scheme, rt.target.Host, err)
			}
			g.refuse(w, r, rec, f)
		},
	}
	if cred != nil {
		proxy.Transport = credentialTransport{base: g.endpointTransport, cred: cred}
	}
	g.guarded(r, rec, func() *refusal { return g.stillDeclared(rec, rt) }, func(r *http.Request) {
		proxy.ServeHTTP(countingWriter{w, &rec.down}, withCountedBody(r, rec))
	})
}

// stillDeclared tells whether the client now at rec's source still
// declares the endpoint rt goes to, with the same URL: nil if so, else why
// not. An endpoint dropped from a template, or its sandbox deleted, ends
// the answers still streaming from it (a model's, say).
func (g *Gateway) stillDeclared(rec *record, rt endpointRoute) *refusal {
	c, known := g.directory.Client(rec.source)
	if !known {
		return refusef(http.StatusForbidden, reasonRevoked,
			"the request to endpoint %s was cut short: no sandbox has address %s any more", rt.name, rec.source)
	}
	if c.Network != nil && slices.ContainsFunc(c.Network.Endpoints, func(ep v1.Endpoint) bool {
		return ep.Name == rt.name && ep.URL == rt.endpoint.URL
	}) {
		return nil
	}
	return refusef(http.StatusForbidden, reasonRevoked,
		"the request to endpoint %s was cut short: sandbox %s no longer declares it (or declares it with another URL)", rt.name, c.Sandbox)
}

// endpointRoute is where an endpoint request goes.
type endpointRoute struct {
	name     string
	endpoint *v1.Endpoint
	target   *url.URL
	// rest is the request's path after /endpoints/NAME, still escaped as
	// the sandbox sent it, so that an encoded slash stays one.
	rest string
}

// findRoute finds the client's endpoint a request path names.
func findRoute(c Client, u *url.URL) (endpointRoute, *refusal) {
	var rt endpointRoute
	rawName, rest, found := strings.Cut(strings.TrimPrefix(u.EscapedPath(), endpointsPrefix), "/")
	if found {
		rt.rest = "/" + rest
	}
	name, err := url.PathUnescape(rawName)
	if err != nil {
		return rt, refusef(http.StatusBadRequest, reasonBadPath, "%q is not an endpoint name", rawName)
	}
	rt.name = name
	if decoded, err := url.PathUnescape(rt.rest); err != nil || climbs(decoded) {
		return rt, refusef(http.StatusBadRequest, reasonBadPath,
			"endpoint paths may not contain .. segments: %s%s goes to the endpoint's URL plus the path after it, never above it",
			endpointsPrefix, name)
	}
	var f *refusal
	if rt.endpoint, f = findEndpoint(c, name); f != nil {
		return rt, f
	}
	rt.target, err = url.Parse(rt.endpoint.URL)
	if t := rt.target; err != nil || (t.Scheme != "http" && t.Scheme != "https") || t.Host == "" || t.RawQuery != "" {
		return rt, refusef(http.StatusBadGateway, reasonBadEndpointURL,
			"endpoint %s's url %q is not an http(s) URL without a query; the template's network.endpoints[].url needs fixing",
			name, rt.endpoint.URL)
	}
	return rt, nil
}

// climbs reports whether a path has a ".." segment, which would take the
// request above the endpoint URL's path on the upstream. Backslashes count
// as separators: some servers treat them as such.
func climbs(path string) bool {
	for _, segment := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '\\' }) {
		if segment == ".." {
			return true
		}
	}
	return false
}

func findEndpoint(c Client, name string) (*v1.Endpoint, *refusal) {
	var names []string
	for i := range c.Network.Endpoints {
		if c.Network.Endpoints[i].Name == name {
			return &c.Network.Endpoints[i], nil
		}
		names = append(names, c.Network.Endpoints[i].Name)
	}
	if len(names) == 0 {
		return nil, refusef(http.StatusNotFound, reasonNoEndpoint,
			"sandbox %s has no endpoint %q: it has no endpoints; a template's network.endpoints declares them", c.Sandbox, name)
	}
	return nil, refusef(http.StatusNotFound, reasonNoEndpoint,
		"sandbox %s has no endpoint %q; its endpoints: %s", c.Sandbox, name, strings.Join(names, ", "))
}

// urlPort is the port a URL's requests go to.
func urlPort(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// direct points out at the endpoint's upstream: its scheme and host, its
// path followed by the rest of the request's path, the request's query,
// and the upstream's Host.
func (rt endpointRoute) direct(out *http.Request) {
	p := rt.target.EscapedPath()
	if rt.rest != "" {
		p = strings.TrimSuffix(p, "/") + rt.rest
	}
	out.URL.Scheme, out.URL.Host = rt.target.Scheme, rt.target.Host
	out.URL.Path, _ = url.PathUnescape(p) // both parts were unescaped before
	out.URL.RawPath = p
	out.Host = ""
}

// credential is an endpoint's credential as one request uses it: the
// header the gateway sets, and the secret it must never let back to the
// sandbox.
type credential struct {
	header string
	value  string // the prefix, then the secret
	secret string
	mask   byte
	masked string
}

// credential reads an endpoint's credential through Secrets, on every
// request, so a rotated Secret takes effect on the next one.
func (g *Gateway) credential(ctx context.Context, endpoint string, c *v1.EndpointCredential) (*credential, *refusal) {
	ref := c.SecretRef
	where := fmt.Sprintf("key %q of Secret %s", ref.Key, ref.Name)
	if ref.Namespace != "" {
		where = fmt.Sprintf("key %q of Secret %s/%s", ref.Key, ref.Namespace, ref.Name)
	}
	raw, err := g.secrets.Credential(ctx, ref)
	if err != nil {
		// The error stays in the log: its text is the Secrets
		// implementation's, not the gateway's, to vouch for.
		f := refusef(http.StatusBadGateway, reasonSecretUnreadable,
			"the credential of endpoint %s could not be read from %s; the gateway must be able to read that Secret", endpoint, where)
		f.cause = err
		return nil, f
	}
	// A key written with echo ends in a newline, which no header carries.
	secret := bytes.TrimSpace(raw)
	value := c.Prefix + string(secret)
	if len(secret) == 0 || !validHeaderValue(value) {
		return nil, refusef(http.StatusBadGateway, reasonSecretUnreadable,
			"the credential of endpoint %s, %s, is empty or holds characters an HTTP header cannot carry", endpoint, where)
	}
	header := c.Header
	if header == "" {
		header = defaultCredentialHeader
	}
	mask := maskByte(secret)
	return &credential{
		header: header,
		value:  value,
		secret: string(secret),
		mask:   mask,
		masked: strings.Repeat(string(mask), len(secret)),
	}, nil
}

// validHeaderValue reports whether v can be sent as a header value: no
// control characters but tab.
func validHeaderValue(v string) bool {
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// apply sets the credential on an outbound request, replacing whatever
// the sandbox sent in that header.
func (c *credential) apply(out *http.Request) {
	out.Header.Set(c.header, c.value)
	// Without the sandbox's Accept-Encoding, the Transport asks for gzip
	// itself and decodes it: the answer is searched as plain bytes.
	out.Header.Del("Accept-Encoding")
}

// credentialTransport masks a credential's secret in everything that
// comes back from the upstream: informational (1xx) headers, headers, body
// and trailers. An upstream that echoes its request (httpbin's /headers)
// must not hand the key to the sandbox.
type credentialTransport struct {
	base http.RoundTripper
	cred *credential
}

func (t credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// Hooks added last run first: this one masks a 1xx response's
	// headers before the ReverseProxy's hook copies them to the sandbox.
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
			redactHeader(http.Header(h), t.cred.secret, t.cred.masked)
			return nil
		},
	})
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	for _, encoding := range resp.Header.Values("Content-Encoding") {
		if !strings.EqualFold(encoding, "identity") {
			_ = resp.Body.Close()
			return nil, refusef(http.StatusBadGateway, reasonUnredactable,
				"the upstream answered in Content-Encoding %s, which the gateway cannot search for the credential it added, so the answer is withheld",
				encoding)
		}
	}
	redactHeader(resp.Header, t.cred.secret, t.cred.masked)
	resp.Body = &redactor{
		src:    resp.Body,
		secret: []byte(t.cred.secret),
		mask:   t.cred.mask,
		atEOF:  func() { redactHeader(resp.Trailer, t.cred.secret, t.cred.masked) },
	}
	return resp, nil
}
