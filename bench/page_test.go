package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/ssetest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/webui"
)

const (
	// pageLoads is how many times the page is loaded for its latency.
	pageLoads = 20
	// pageChanges is how many sandboxes are stopped, one at a time, for
	// the time a change takes to reach an open page.
	pageChanges = 20
	// pageIdle is how long an open page is watched with nothing changing.
	pageIdle = 30 * time.Second
)

// pageFigures are the Sandboxes page's, served by this process as
// `agentsandbox ui` serves it, with the everyone's view (view=all,
// newest first) that an administrator opens: the whole cluster sorted and
// paged on every load and every change.
type pageFigures struct {
	// reading is the server's start until its watch caches hold the
	// cluster (what `agentsandbox ui` waits for before it names the page's
	// address), and first the first load after it.
	reading, first time.Duration
	// loads are the later loads, sorted; size is the page's HTML.
	loads []time.Duration
	size  int
	// changes are the times from a sandbox's stop being sent to the API
	// server to its row, Stopped, read from the open page's stream, sorted.
	changes []time.Duration
	// idle are the events an open page received over pageIdle with
	// nothing changing, and idleCPU this process's CPU meanwhile (the
	// reconciler's at rest included).
	idle    []ssetest.Event
	idleCPU time.Duration
}

// measurePage starts the page's server on the cluster and measures it:
// pageLoads loads of the first page, pageChanges stops of sandboxes it
// shows reaching an open page, and that page at rest. The stopped
// sandboxes are made for it, of a template that does not exist (the
// controller writes their status once and waits), so they are the newest
// and on the first page; they are deleted, and the server stopped, before
// it returns.
func measurePage(b *testing.B, label string) pageFigures {
	cluster := testcluster.Get(b)
	c := cluster.Client
	ctx := context.Background()
	run := testcluster.Name("page-" + label)
	names := make([]string, pageChanges)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%02d", run, i)
		sbx := &v1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{"agentsandbox.dev/test-run": run}},
			Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: run + "-missing"}, Owner: "page@example.com"},
		}
		if err := c.Create(ctx, sbx); err != nil {
			b.Fatal(err)
		}
	}
	defer deletePageSandboxes(b, c, run)
	// Their first status written, so it does not arrive beside a stop.
	testcluster.Eventually(b, "the page's sandboxes' first status", func() (bool, string) {
		for _, name := range names {
			sbx := &v1.Sandbox{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, sbx); err != nil || sbx.Status.ObservedGeneration != sbx.Generation {
				return false, fmt.Sprintf("%s: status of generation %d, %v", name, sbx.Status.ObservedGeneration, err)
			}
		}
		return true, ""
	})

	var f pageFigures
	url, stop := servePage(b, &f.reading)
	defer stop()
	start := time.Now()
	page := load(b, url+"/?view=all")
	f.first = time.Since(start)
	for _, name := range names {
		if !strings.Contains(page, `data-sandbox="`+name+`"`) {
			b.Fatalf("sandbox %s, among the newest, is not on the first page of view=all", name)
		}
	}
	for range pageLoads {
		start := time.Now()
		page = load(b, url+"/?view=all")
		f.loads = append(f.loads, time.Since(start))
	}
	slices.Sort(f.loads)
	f.size = len(page)

	events := ssetest.Open(b, url+"/events?view=all")
	events.Next(b, "rows", 30*time.Second)
	for _, name := range names {
		sent := time.Now()
		if err := c.Patch(ctx, &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"state":"Stopped"}}`))); err != nil {
			b.Fatal(err)
		}
		for {
			ev := events.Next(b, "rows", 30*time.Second)
			var rows struct {
				Changed map[string]string `json:"changed"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &rows); err != nil {
				b.Fatalf("a rows event that does not decode: %v", err)
			}
			if strings.Contains(rows.Changed[name], "<td>Stopped</td>") {
				f.changes = append(f.changes, ev.At.Sub(sent))
				break
			}
		}
		// What the controller writes after the stop reaches the page
		// before the next one is sent.
		time.Sleep(500 * time.Millisecond)
		events.Drain()
	}
	slices.Sort(f.changes)

	time.Sleep(2 * time.Second)
	events.Drain()
	cpu := cpuTime()
	f.idle = events.During(pageIdle)
	f.idleCPU = cpuTime() - cpu
	return f
}

// BenchmarkPage measures the Sandboxes page on the cluster as it is, the
// way BenchmarkScale measures it on the empty cluster and at scale: a
// quick look at the page alone.
func BenchmarkPage(b *testing.B) {
	var f pageFigures
	for b.Loop() {
		f = measurePage(b, "now")
	}
	for _, row := range pageRows(f, f) {
		fmt.Printf("%s: %s\n", row.what, row.atScale)
	}
	b.ReportMetric(float64(percentile(f.loads, 0.5).Microseconds())/1000, "page-load-p50-ms")
	b.ReportMetric(float64(percentile(f.changes, 0.5).Microseconds())/1000, "page-change-p50-ms")
}

// pageRows are the table's rows for the page, empty and at scale.
func pageRows(empty, atScale pageFigures) []scaleRow {
	idle := func(f pageFigures) string {
		bytes := 0
		for _, ev := range f.idle {
			bytes += ev.Size
		}
		return fmt.Sprintf("%d events (%s), %d bytes; %s", len(f.idle), eventKinds(f.idle), bytes, ms(f.idleCPU))
	}
	rows := []scaleRow{
		{"the page's server reading the cluster (`agentsandbox ui` before it names the page)", ms(empty.reading), ms(atScale.reading), ratio(float64(atScale.reading), float64(empty.reading))},
		{"the page (view=all): first load after that", ms(empty.first), ms(atScale.first), ratio(float64(atScale.first), float64(empty.first))},
		{"the page (view=all): its HTML", fmt.Sprintf("%.1f KiB", float64(empty.size)/1024), fmt.Sprintf("%.1f KiB", float64(atScale.size)/1024), ratio(float64(atScale.size), float64(empty.size))},
	}
	for _, p := range []float64{0.5, 0.99} {
		e, s := percentile(empty.loads, p), percentile(atScale.loads, p)
		rows = append(rows, scaleRow{fmt.Sprintf("the page (view=all): a load p%d (of %d)", int(p*100), pageLoads), ms(e), ms(s), ratio(float64(s), float64(e))})
	}
	for _, p := range []float64{0.5, 0.99} {
		e, s := percentile(empty.changes, p), percentile(atScale.changes, p)
		rows = append(rows, scaleRow{fmt.Sprintf("a sandbox's stop reaching an open page p%d (of %d)", int(p*100), pageChanges), ms(e), ms(s), ratio(float64(s), float64(e))})
	}
	rows = append(rows, scaleRow{fmt.Sprintf("an open page with nothing changing (%s): events, bytes; this process's CPU", pageIdle), idle(empty), idle(atScale), ""})
	return rows
}

// eventKinds counts events by name, and section events by the section
// they carry: what an open page was sent, to be explained.
func eventKinds(events []ssetest.Event) string {
	counts := map[string]int{}
	for _, ev := range events {
		kind := ev.Name
		var sec struct {
			ID string `json:"id"`
		}
		if ev.Name == "section" && json.Unmarshal([]byte(ev.Data), &sec) == nil {
			kind += " " + sec.ID
		}
		counts[kind]++
	}
	kinds := slices.Sorted(maps.Keys(counts))
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(kinds, ", ")
}

// servePage starts the page's server on a loopback port, as `agentsandbox
// ui` does: it reads the cluster, which takes *reading, then serves.
func servePage(b *testing.B, reading *time.Duration) (url string, stop func()) {
	cfg := testcluster.Get(b).Config
	srv, err := webui.New(cfg, webui.Options{Context: "bench", Server: cfg.Host})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	if err := srv.Start(ctx); err != nil {
		b.Fatal(err)
	}
	*reading = time.Since(start)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	return "http://" + l.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("the page's server: %v", err)
		}
	}
}

// load fetches url's body, which must be 200 OK.
func load(b *testing.B, url string) string {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(body)
}

// deletePageSandboxes deletes the page's sandboxes and waits until they
// are gone.
func deletePageSandboxes(b *testing.B, c client.Client, run string) {
	labelled := client.MatchingLabels{"agentsandbox.dev/test-run": run}
	if err := c.DeleteAllOf(context.Background(), &v1.Sandbox{}, labelled); err != nil {
		b.Error(err)
		return
	}
	testcluster.Eventually(b, "the page's sandboxes gone", func() (bool, string) {
		left := &v1.SandboxList{}
		err := c.List(context.Background(), left, labelled)
		return err == nil && len(left.Items) == 0, fmt.Sprintf("%d left, %v", len(left.Items), err)
	})
}
