package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

const (
	benchRequests = 2000      // requests timed for each latency distribution
	bulkSize      = 256 << 20 // bytes moved for each throughput figure
	benchTunnels  = 1000      // tunnels held open at once
	benchClients  = 1000      // sandboxes in the measured Directory
)

// BenchmarkGateway measures the gateway on loopback, in one run, against
// the same work done without it:
//
//	go test ./gateway/ -run '^$' -bench Gateway -benchtime 1x
//
// latency: an HTTPS request over a kept-alive connection, and one on a
// connection of its own, through a CONNECT tunnel and direct (the floor); throughput: 256 MiB through one
// tunnel and direct, over TLS and as raw TCP, best of three; tunnels: 1,000 held open at
// once, bytes echoed through each; and the heap a Directory of 1,000
// sandboxes' rules takes. Every figure is reported as a metric and the
// lot as a table in the log.
func BenchmarkGateway(b *testing.B) {
	e := newEnv(b)
	bench := &benchWorld{env: e}
	bench.start(b)
	var table []string
	row := func(format string, args ...any) { table = append(table, fmt.Sprintf(format, args...)) }

	tunnel, direct := bench.latency(b, e.proxyClient(alice)), bench.latency(b, bench.directClient())
	tp50, tp99, dp50, dp99 := percentile(tunnel, 0.50), percentile(tunnel, 0.99), percentile(direct, 0.50), percentile(direct, 0.99)
	b.ReportMetric(ms(tp50), "tunnel-p50-ms")
	b.ReportMetric(ms(tp99), "tunnel-p99-ms")
	b.ReportMetric(ms(dp50), "direct-p50-ms")
	b.ReportMetric(ms(dp99), "direct-p99-ms")
	b.ReportMetric(ms(tp50-dp50), "added-p50-ms")
	b.ReportMetric(ms(tp99-dp99), "added-p99-ms")
	b.ReportMetric(float64(tp50)/float64(dp50), "p50-ratio")
	row("HTTPS request, kept-alive   p50 %.3f ms (direct %.3f, added %.3f, x%.2f)   p99 %.3f ms (direct %.3f, added %.3f, x%.2f)",
		ms(tp50), ms(dp50), ms(tp50-dp50), float64(tp50)/float64(dp50), ms(tp99), ms(dp99), ms(tp99-dp99), float64(tp99)/float64(dp99))

	// A connection of its own for every request: the CONNECT, the
	// gateway's lookup of the sandbox and of the name, and a dial are paid
	// each time, beside a TLS handshake both paths pay.
	freshTunnel, freshDirect := bench.latency(b, freshConnections(e.proxyClient(alice))), bench.latency(b, freshConnections(bench.directClient()))
	fp50, fp99, fdp50, fdp99 := percentile(freshTunnel, 0.50), percentile(freshTunnel, 0.99), percentile(freshDirect, 0.50), percentile(freshDirect, 0.99)
	b.ReportMetric(ms(fp50-fdp50), "new-conn-added-p50-ms")
	b.ReportMetric(ms(fp99-fdp99), "new-conn-added-p99-ms")
	b.ReportMetric(float64(fp50)/float64(fdp50), "new-conn-p50-ratio")
	row("HTTPS request, new conn.    p50 %.3f ms (direct %.3f, added %.3f, x%.2f)   p99 %.3f ms (direct %.3f, added %.3f, x%.2f)",
		ms(fp50), ms(fdp50), ms(fp50-fdp50), float64(fp50)/float64(fdp50), ms(fp99), ms(fdp99), ms(fp99-fdp99), float64(fp99)/float64(fdp99))

	proxied, floor := e.proxyClient(alice), bench.directClient()
	tlsTunnel, tlsDirect := bestOf(func() float64 { return bench.download(b, proxied) }, func() float64 { return bench.download(b, floor) })
	b.ReportMetric(tlsTunnel, "tls-tunnel-MB/s")
	b.ReportMetric(tlsDirect, "tls-direct-MB/s")
	b.ReportMetric(tlsTunnel/tlsDirect, "tls-throughput-ratio")
	row("256 MiB over HTTPS          tunnel %.0f MB/s, direct %.0f MB/s, ratio %.2f", tlsTunnel, tlsDirect, tlsTunnel/tlsDirect)

	rawTunnel, rawDirect := bestOf(func() float64 { return bench.bulk(b, true) }, func() float64 { return bench.bulk(b, false) })
	b.ReportMetric(rawTunnel, "raw-tunnel-MB/s")
	b.ReportMetric(rawDirect, "raw-direct-MB/s")
	b.ReportMetric(rawTunnel/rawDirect, "raw-throughput-ratio")
	row("256 MiB raw TCP             tunnel %.0f MB/s, direct %.0f MB/s, ratio %.2f", rawTunnel, rawDirect, rawTunnel/rawDirect)

	took, open, memPerTunnel := bench.manyTunnels(b)
	b.ReportMetric(float64(open), "tunnels-open")
	b.ReportMetric(ms(took), "tunnels-establish-ms")
	b.ReportMetric(memPerTunnel/1024, "mem-KiB/tunnel")
	row("%d tunnels at once        all open (gauge %d), established and echoed in %.0f ms; %.1f KiB of heap and stacks a tunnel (whole process: clients, gateway, upstream)",
		benchTunnels, open, ms(took), memPerTunnel/1024)

	perClient := directoryHeap(b)
	b.ReportMetric(perClient, "directory-B/client")
	row("Directory of %d sandboxes %.0f B a sandbox, %.0f KiB in all", benchClients, perClient, perClient*benchClients/1024)

	b.Logf("gateway on loopback, GOMAXPROCS %d:\n  %s", runtime.GOMAXPROCS(0), strings.Join(table, "\n  "))
}

// throughputRuns is how many times each throughput is measured, the two
// paths taking turns; the best run of each counts, as the one least
// disturbed by whatever else the machine was doing.
const throughputRuns = 3

func bestOf(tunnel, direct func() float64) (bestTunnel, bestDirect float64) {
	for range throughputRuns {
		bestTunnel = max(bestTunnel, tunnel())
		bestDirect = max(bestDirect, direct())
	}
	return bestTunnel, bestDirect
}

// benchWorld holds the benchmark's upstreams: HTTPS (small and bulk
// answers), a raw bulk source and an echo server, each reachable by name
// through the gateway and by address directly.
type benchWorld struct {
	*env
	httpsPort, bulkPort, echoPort uint16
}

func (w *benchWorld) start(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(rw http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(rw, "ok") })
	mux.HandleFunc("/bulk", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Length", strconv.Itoa(bulkSize))
		chunk := make([]byte, 1<<20)
		for range bulkSize / len(chunk) {
			if _, err := rw.Write(chunk); err != nil {
				return
			}
		}
	})
	w.httpsPort = w.httpsUpstream("127.0.0.10", mux, "bench.example.test")
	w.bulkPort = serveRaw(b, "127.0.0.11", func(conn net.Conn) {
		chunk := make([]byte, 1<<20)
		for range bulkSize / len(chunk) {
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
	})
	w.echoPort = serveRaw(b, "127.0.0.12", func(conn net.Conn) { _, _ = io.Copy(conn, conn) })
	for name, ip := range map[string]string{"bench.example.test": "127.0.0.10", "bulk.example.test": "127.0.0.11", "echo.example.test": "127.0.0.12"} {
		w.dns.set(name, ip)
	}
	w.sandbox(alice, "alice", v1.Network{Egress: []v1.EgressRule{
		hostsRule(w.httpsPort, "bench.example.test"),
		hostsRule(w.bulkPort, "bulk.example.test"),
		hostsRule(w.echoPort, "echo.example.test"),
	}})
}

// directClient reaches bench.example.test at its address, from alice's,
// with what the proxied client has: the floor.
func (w *benchWorld) directClient() *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(alice)}}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, hostPortOf("127.0.0.10", w.httpsPort))
		},
		TLSClientConfig: &tls.Config{RootCAs: w.ca.pool},
	}
	w.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// freshConnections has client open a connection (and, through the
// gateway, a tunnel) for every request.
func freshConnections(client *http.Client) *http.Client {
	client.Transport.(*http.Transport).DisableKeepAlives = true
	return client
}

// latency times benchRequests small HTTPS requests on one kept-alive
// connection (after one that opens it), or each on its own
// (freshConnections).
func (w *benchWorld) latency(b *testing.B, client *http.Client) []time.Duration {
	url := fmt.Sprintf("https://bench.example.test:%d/small", w.httpsPort)
	get := func() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	get()
	took := make([]time.Duration, benchRequests)
	for i := range took {
		start := time.Now()
		get()
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	return took
}

// download fetches bulkSize bytes over HTTPS and returns MB/s.
func (w *benchWorld) download(b *testing.B, client *http.Client) float64 {
	client.Transport.(*http.Transport).ReadBufferSize = 64 << 10
	start := time.Now()
	resp, err := client.Get(fmt.Sprintf("https://bench.example.test:%d/bulk", w.httpsPort))
	if err != nil {
		b.Fatal(err)
	}
	n, err := discard(resp.Body)
	_ = resp.Body.Close()
	if err != nil || n != bulkSize {
		b.Fatalf("read %d bytes: %v", n, err)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds()
}

// bulk reads bulkSize raw bytes from the bulk source, through a tunnel or
// directly, and returns MB/s.
func (w *benchWorld) bulk(b *testing.B, throughGateway bool) float64 {
	start := time.Now()
	var r io.Reader
	if throughGateway {
		conn, resp := w.connect(alice, hostPortOf("bulk.example.test", w.bulkPort))
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("CONNECT: %s", resp.Status)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Time{})
		// Past what the CONNECT answer's reader holds, read the socket.
		r = io.MultiReader(bufferedOf(conn.r), conn.Conn)
	} else {
		conn, err := net.Dial("tcp", hostPortOf("127.0.0.11", w.bulkPort))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		r = conn
	}
	n, err := discard(r)
	if err != nil || n != bulkSize {
		b.Fatalf("read %d bytes: %v", n, err)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds()
}

// discard reads r to its end in large reads, as a client that keeps up
// would (io.Discard would read in 8 KiB pieces).
func discard(r io.Reader) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	for {
		n, err := r.Read(buf)
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// bufferedOf is what r has read ahead and not returned yet.
func bufferedOf(r *bufio.Reader) io.Reader {
	ahead, _ := r.Peek(r.Buffered())
	return bytes.NewReader(ahead)
}

// manyTunnels opens benchTunnels tunnels to the echo server and echoes
// bytes through each, keeping all of them open until every one has, and
// returns how long that took, what the open-tunnels gauge then said, and
// the process's growth in heap and stacks per tunnel.
func (w *benchWorld) manyTunnels(b *testing.B) (time.Duration, int, float64) {
	already := metricValue(b, w.gw.metrics.openTunnels)
	before := memInUse()
	start := time.Now()
	conns := make([]*tunnelConn, benchTunnels)
	limit := make(chan struct{}, 64) // opening: no more at once than a resolver burst takes
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			conn, resp, err := w.openTunnel(alice, hostPortOf("echo.example.test", w.echoPort))
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Errorf("CONNECT %d: %v %v", i, resp, err)
				return
			}
			msg := fmt.Sprintf("tunnel %04d\n", i)
			_, _ = io.WriteString(conn, msg)
			got, err := bufio.NewReader(conn).ReadString('\n')
			if got != msg {
				b.Errorf("tunnel %d echoed %q, %v", i, got, err)
			}
			conns[i] = conn
		})
	}
	wg.Wait()
	took := time.Since(start)
	open := int(metricValue(b, w.gw.metrics.openTunnels) - already)
	perTunnel := float64(memInUse()-before) / benchTunnels
	for _, c := range conns {
		if c != nil {
			_ = c.Close()
		}
	}
	eventually(b, "every tunnel closed", func() bool { return metricValue(b, w.gw.metrics.openTunnels) == already })
	return took, open, perTunnel
}

// directoryHeap is the heap, in bytes a sandbox, of a Directory holding
// benchClients sandboxes, each with a template network of a realistic
// size: hosts rules, cidr rules and endpoints.
func directoryHeap(b *testing.B) float64 {
	before := heapAlloc()
	dir := &directory{clients: map[netip.Addr]Client{}}
	for i := range benchClients {
		addr := netip.AddrFrom4([4]byte{10, 42, byte(i >> 8), byte(i)})
		name := fmt.Sprintf("sandbox-%04d", i)
		dir.clients[addr] = Client{Sandbox: name, Owner: name + "@example.test", Network: &v1.Network{
			Egress: []v1.EgressRule{
				hostsRule(443, "pypi.org", "files.pythonhosted.org", "github.com", "*.githubusercontent.com", "registry.npmjs.org"),
				hostsRule(22, "github.com"),
				cidrRule("140.82.112.0/20", 443),
				cidrRule("10.96.0.10/32", 53),
			},
			Endpoints: []v1.Endpoint{
				{Name: "llm", URL: "https://api.openai.com/v1", Credential: &v1.EndpointCredential{
					SecretRef: v1.SecretKeyReference{Namespace: "agentsandbox-system", Name: "openai", Key: "token"}, Prefix: "Bearer "}},
				{Name: "models", URL: "http://vllm.models.svc:8000"},
			},
		}}
	}
	perClient := float64(heapAlloc()-before) / benchClients
	if _, ok := dir.Client(netip.AddrFrom4([4]byte{10, 42, 0, 1})); !ok {
		b.Fatal("the Directory lost a sandbox")
	}
	return perClient
}

// heapAlloc is the live heap after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// memInUse is the live heap and the goroutine stacks after a collection:
// a tunnel's cost is mostly its goroutines'.
func memInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(p*float64(len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
