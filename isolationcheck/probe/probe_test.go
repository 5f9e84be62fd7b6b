package probe

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testdns"
)

// listener accepts and closes connections on a loopback port until the
// test ends.
func listener(t *testing.T) (string, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestConnectNamesEachOutcome(t *testing.T) {
	open, _ := listener(t)
	closed := "127.0.0.1:" + strconv.Itoa(closedPort(t))
	got := Connect([]string{open, closed, "not-an-address"}, time.Second)
	want := []string{Open, Refused, Failed}
	for i, r := range got {
		if r.Result != want[i] {
			t.Errorf("%s: %s (%s), want %s", r.Address, r.Result, r.Detail, want[i])
		}
	}
}

func TestScanFindsTheOpenPort(t *testing.T) {
	_, port := listener(t)
	got := Scan("127.0.0.1", port-5, port+5, time.Second)
	if got.Tried != 11 || len(got.Open) != 1 || got.Open[0] != port {
		t.Errorf("scan of %d±5: tried %d, open %v; want 11 tried and only %d open", port, got.Tried, got.Open, port)
	}
}

func TestListenReportsWhoConnectedUntilStdinEnds(t *testing.T) {
	port := closedPort(t)
	stdin, stdinW := io.Pipe()
	var out syncBuffer
	done := make(chan ListenResult)
	go func() {
		r, err := Listen(strconv.Itoa(port), stdin, &out)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	for !strings.Contains(out.String(), Listening) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := dial("127.0.0.1:"+strconv.Itoa(port), time.Second); r.Result != Open {
		t.Fatalf("the listener did not answer: %+v", r)
	}
	stdinW.Close()
	select {
	case r := <-done:
		if len(r.Accepted) != 1 || !strings.HasPrefix(r.Accepted[0], "127.0.0.1:") {
			t.Errorf("accepted %v, want the one connection from 127.0.0.1", r.Accepted)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not end when its stdin did")
	}
}

func TestProcessesStartsAndEndsItsChildren(t *testing.T) {
	got := Processes(20)
	if got.Started != 20 || got.Refused != "" {
		t.Errorf("started %d (refused %q), want 20 and none refused", got.Started, got.Refused)
	}
}

func TestWindowSeesAnOpenDestinationAtOnce(t *testing.T) {
	open, _ := listener(t)
	got := Window(open, 200*time.Millisecond)
	if got.Opens == 0 || got.FirstOpen < 0 || got.FirstOpen > 100 || got.Opens != got.Attempts {
		t.Errorf("window on a listener: %+v, want every attempt open from the first", got)
	}
	closed := Window("127.0.0.1:"+strconv.Itoa(closedPort(t)), 100*time.Millisecond)
	if closed.Opens != 0 || closed.FirstOpen != -1 || closed.Attempts == 0 {
		t.Errorf("window on a closed port: %+v, want attempts and none open", closed)
	}
}

func TestFillTakesWhatTheFileSystemGivesAndRemovesIt(t *testing.T) {
	dir := t.TempDir()
	got := Fill(dir, 1<<20)
	if got.Allocated != 1<<20 || got.Refused != "" {
		t.Errorf("fill of 1 MiB: %+v", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("fill left %v behind", entries)
	}
}

func TestMainPrintsJSONAndRefusesUnknownProbes(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"facts"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("facts exited %d: %s", code, errOut.String())
	}
	var f Facts
	if err := json.Unmarshal(out.Bytes(), &f); err != nil || f.PID1 == "" || f.Processes == 0 {
		t.Errorf("facts printed %s (%v)", out.String(), err)
	}
	errOut.Reset()
	if code := Main([]string{"nonsense"}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown probe "nonsense"`) {
		t.Errorf("an unknown probe exited %d: %s", code, errOut.String())
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDNSTellsAnAnswerFromSilence: a resolver that replies (NXDOMAIN for
// the check's name) is answered, a port with no resolver refused, and the
// name asked for is new each time, so that no cache can answer it.
func TestDNSTellsAnAnswerFromSilence(t *testing.T) {
	server, err := testdns.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := silent.LocalAddr().String()
	silent.Close()

	got := DNS([]string{server.Addr(), closed}, time.Second)
	if len(got.Answers) < 2 {
		t.Fatalf("answers = %+v", got)
	}
	answers := got.Answers[len(got.Answers)-2:]
	if a := answers[0]; a.Server != server.Addr() || a.Result != Answered || a.Rcode != "NXDOMAIN" {
		t.Errorf("the test resolver: %+v, want answered NXDOMAIN", a)
	}
	if !server.Queried(got.Name) {
		t.Errorf("the test resolver was never asked for %s", got.Name)
	}
	if a := answers[1]; a.Result != Refused {
		t.Errorf("a port without a resolver: %+v, want refused", a)
	}
	if again := DNS(nil, time.Second); again.Name == got.Name {
		t.Errorf("the same name twice: %s", got.Name)
	}
}

func TestNameserversReadsResolvConf(t *testing.T) {
	conf := "search ns.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\n# nameserver 1.1.1.1\nnameserver fd00::a\noptions ndots:5\n"
	if got := nameservers(conf); strings.Join(got, " ") != "10.96.0.10:53 [fd00::a]:53" {
		t.Errorf("nameservers = %v", got)
	}
	if got := nameservers("search .\n"); len(got) != 0 {
		t.Errorf("no nameserver line: %v", got)
	}
}

func TestUsualClusterResolverIsTheTenthServiceAddress(t *testing.T) {
	for host, want := range map[string]string{"10.96.0.1": "10.96.0.10:53", "172.20.0.1": "172.20.0.10:53", "10.0.0.7": "", "fd00::1": "", "": ""} {
		if got := usualClusterResolver(host); got != want {
			t.Errorf("usualClusterResolver(%q) = %q, want %q", host, got, want)
		}
	}
}
