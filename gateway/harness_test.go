package gateway

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testdns"
)

// The test's world on loopback: sandboxes connect from 127.0.0.2 (alice)
// and 127.0.0.3 (bob), 127.0.0.4 is no sandbox, and upstreams listen on
// 127.0.0.5 and up. Loopback is not blocked here; the private and
// metadata ranges are.
const (
	alice   = "127.0.0.2"
	bob     = "127.0.0.3"
	unknown = "127.0.0.4"
)

var testBlocked = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
}

// env is one gateway with everything around it: a CA the upstreams'
// certificates come from, a DNS server, the directory of sandboxes, their
// secrets, and the gateway's logs and metrics.
type env struct {
	t       testing.TB
	ca      *testCA
	dns     dnsServer
	dir     *directory
	secrets *fakeSecrets
	logs    *logLines
	reg     *prometheus.Registry
	gw      *Gateway
	addr    string // the gateway's, host:port

	mu sync.Mutex
	// redirect sends dials for unroutable test addresses (10.1.2.3:443)
	// to loopback ones, so that "allowed" can be shown to carry bytes.
	redirect map[string]string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{
		t:        t,
		ca:       newTestCA(t),
		dns:      startDNS(t),
		dir:      &directory{clients: map[netip.Addr]Client{}},
		secrets:  &fakeSecrets{values: map[string]string{}},
		logs:     &logLines{},
		reg:      prometheus.NewRegistry(),
		redirect: map[string]string{},
	}
	gw, err := New(Config{
		Directory:   e.dir,
		Secrets:     e.secrets,
		Resolver:    e.dns.Resolver(),
		Blocked:     testBlocked,
		UpstreamTLS: &tls.Config{RootCAs: e.ca.pool},
		DialTimeout: 2 * time.Second,
		Recheck:     50 * time.Millisecond,
		Log:         funcr.New(e.logs.add, funcr.Options{}),
		Metrics:     e.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	dial := gw.dial
	gw.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		e.mu.Lock()
		if to, ok := e.redirect[address]; ok {
			address = to
		}
		e.mu.Unlock()
		return dial(ctx, network, address)
	}
	e.gw = gw
	srv := httptest.NewUnstartedServer(gw)
	srv.Listener = listen(t, "127.0.0.1")
	srv.Start()
	t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()
	return e
}

func listen(t testing.TB, ip string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func portOf(l net.Listener) uint16 { return uint16(l.Addr().(*net.TCPAddr).Port) }

// serveRaw accepts TCP connections on ip and runs serve on each.
func serveRaw(t testing.TB, ip string, serve func(net.Conn)) uint16 {
	l := listen(t, ip)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				serve(conn)
			}()
		}
	}()
	return portOf(l)
}

// sandbox declares the sandbox at address src.
func (e *env) sandbox(src, name string, n v1.Network) {
	e.dir.mu.Lock()
	defer e.dir.mu.Unlock()
	e.dir.clients[netip.MustParseAddr(src)] = Client{Sandbox: name, Owner: name + "@example.test", Network: &n}
}

// forget removes the sandbox at address src, as a deleted one goes.
func (e *env) forget(src string) {
	e.dir.mu.Lock()
	defer e.dir.mu.Unlock()
	delete(e.dir.clients, netip.MustParseAddr(src))
}

// redirectDial has the gateway's dials to from go to to.
func (e *env) redirectDial(from, to string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.redirect[from] = to
}

// httpsUpstream serves h over TLS on ip with a certificate for names (and
// ip), and returns its port.
func (e *env) httpsUpstream(ip string, h http.Handler, names ...string) uint16 {
	e.t.Helper()
	return serveTLS(e.t, ip, h, e.ca.certificate(e.t, ip, names...))
}

// serveTLS serves h over TLS on ip with cert, and returns its port.
func serveTLS(t testing.TB, ip string, h http.Handler, cert tls.Certificate) uint16 {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = listen(t, ip)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return portOf(srv.Listener)
}

// httpUpstream serves h in plain HTTP on ip and returns its port.
func (e *env) httpUpstream(ip string, h http.Handler) uint16 {
	e.t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = listen(e.t, ip)
	srv.Start()
	e.t.Cleanup(srv.Close)
	return portOf(srv.Listener)
}

// proxyClient is an HTTP client of the sandbox at src: everything goes
// through the gateway, and only the test CA is trusted.
func (e *env) proxyClient(src string) *http.Client {
	proxy := &url.URL{Scheme: "http", Host: e.addr}
	return e.clientVia(src, http.ProxyURL(proxy))
}

// directClient is an HTTP client of the sandbox at src that sends its
// requests to the gateway itself, as endpoint calls are.
func (e *env) directClient(src string) *http.Client { return e.clientVia(src, nil) }

func (e *env) clientVia(src string, proxy func(*http.Request) (*url.URL, error)) *http.Client {
	tr := &http.Transport{
		Proxy:           proxy,
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext,
		TLSClientConfig: &tls.Config{RootCAs: e.ca.pool},
	}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// endpointURL is the address the sandbox calls an endpoint at.
func (e *env) endpointURL(name, rest string) string {
	return "http://" + e.addr + endpointsPrefix + name + rest
}

// connect opens a tunnel by hand from src to target and returns the
// connection and the gateway's answer.
func (e *env) connect(src, target string) (*tunnelConn, *http.Response) {
	e.t.Helper()
	conn, resp, err := e.openTunnel(src, target)
	if err != nil {
		e.t.Fatal(err)
	}
	return conn, resp
}

// openTunnel is connect for any goroutine: it returns its error.
func (e *env) openTunnel(src, target string) (*tunnelConn, *http.Response, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", e.addr)
	if err != nil {
		return nil, nil, err
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Host: target}, Host: target, Header: http.Header{}}
	if err := req.Write(conn); err != nil {
		return nil, nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, err
	}
	return &tunnelConn{Conn: conn, r: br}, resp, nil
}

// tunnelConn reads through the reader that read the CONNECT answer, which
// may hold the tunnel's first bytes already.
type tunnelConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *tunnelConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *tunnelConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

func readBody(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// followStream reads the first line of a streaming response, makes change,
// and lets the upstream send the rest (release). With logParts, the
// gateway must cut the response short once change is made, logging a line
// with every one of logParts; without, the rest must arrive whole.
func (e *env) followStream(t *testing.T, resp *http.Response, change, release func(), logParts ...string) {
	t.Helper()
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if first, err := r.ReadString('\n'); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("%s, first line %q: %v", resp.Status, first, err)
	}
	change()
	if len(logParts) == 0 {
		time.Sleep(300 * time.Millisecond) // several rechecks
		release()
		if rest, err := io.ReadAll(r); err != nil || len(rest) == 0 {
			t.Fatalf("the response its rules still allow was cut: read %q, %v", rest, err)
		}
		return
	}
	e.logs.waitLine(t, logParts...)
	release()
	if rest, err := io.ReadAll(r); err == nil {
		t.Fatalf("the response ended whole (%q after the first line) after its rules stopped allowing it", rest)
	}
}

// eventually waits up to 5s for cond: the gateway logs and counts a
// request once its handler returns, after the client has its answer.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// metricValue reads a counter or a gauge.
func metricValue(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// hostsRule allows hosts on port.
func hostsRule(port uint16, hosts ...string) v1.EgressRule {
	return v1.EgressRule{Hosts: hosts, Ports: []v1.NetworkPort{{Port: int32(port)}}}
}

// cidrRule allows cidr on port.
func cidrRule(cidr string, port uint16) v1.EgressRule {
	return v1.EgressRule{CIDR: cidr, Ports: []v1.NetworkPort{{Port: int32(port)}}}
}

func hostPortOf(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// directory is the gateway's Directory for the test: sandboxes by address.
type directory struct {
	mu      sync.Mutex
	clients map[netip.Addr]Client
}

func (d *directory) Client(addr netip.Addr) (Client, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.clients[addr]
	return c, ok
}

// fakeSecrets holds credentials by Secret name/key; a value can change
// between requests, as a rotated Secret does.
type fakeSecrets struct {
	mu     sync.Mutex
	values map[string]string
	err    error
}

func (s *fakeSecrets) set(name, key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[name+"/"+key] = value
}

func (s *fakeSecrets) Credential(_ context.Context, ref v1.SecretKeyReference) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	v, ok := s.values[ref.Name+"/"+ref.Key]
	if !ok {
		return nil, &missingSecretError{ref: ref}
	}
	return []byte(v), nil
}

type missingSecretError struct{ ref v1.SecretKeyReference }

func (e *missingSecretError) Error() string { return "no Secret " + e.ref.Name }

// logLines keeps what the gateway logs, one line per call.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, args)
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// waitLine waits for a line holding every one of parts and returns it.
func (l *logLines) waitLine(t testing.TB, parts ...string) string {
	t.Helper()
	var found string
	eventually(t, "a log line with "+strings.Join(parts, " "), func() bool {
		for _, line := range l.all() {
			if containsAll(line, parts...) {
				found = line
				return true
			}
		}
		return false
	})
	return found
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// testCA issues the upstreams' certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gateway test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// certificate is a server certificate for ip and names.
func (ca *testCA) certificate(t testing.TB, ip string, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: ip},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.ParseIP(ip)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// dnsServer is the test's resolver (internal/testharness/testdns) on 127.0.0.1.
type dnsServer struct{ *testdns.Server }

func startDNS(t testing.TB) dnsServer {
	t.Helper()
	s, err := testdns.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return dnsServer{s}
}

func (d dnsServer) set(name, addr string) { d.Set(name, netip.MustParseAddr(addr)) }

func (d dnsServer) wasQueried(name string) bool { return d.Queried(name) }
