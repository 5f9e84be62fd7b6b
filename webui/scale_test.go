package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/ssetest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// scaleSandboxes is how many sandboxes TestPageAtScale puts on the
// cluster; the page shows them 50 at a time.
const scaleSandboxes = 2000

// TestPageAtScale: with 2,000 sandboxes on the cluster, the page is one
// page of them, small; the filter finds a few by owner, and a change to one
// of them reaches an open page as that row alone, without a reload.
func TestPageAtScale(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	// Their template does not exist: each stalls after one status write,
	// which keeps 2,000 of them cheap for the controllers.
	missing, run := testcluster.Name("scale-missing"), testcluster.Name("scale")
	owner := run + "@example.com"
	var mine []string
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range scaleSandboxes {
		sbx := &v1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", run, i), Labels: map[string]string{"agentsandbox.dev/test-run": run}},
			Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: missing}, Owner: fmt.Sprintf("user%d@example.com", i%50)},
		}
		if i%300 == 7 {
			sbx.Spec.Owner = owner
			mine = append(mine, sbx.Name)
		}
		g.Go(func() error { return c.Client.Create(gctx, sbx) })
	}
	t.Cleanup(func() {
		// Gone before the package's controllers stop, which finalize
		// them: left to the next package on this cluster, 2,000
		// finalizers would be its controllers' first work.
		labelled := client.MatchingLabels{"agentsandbox.dev/test-run": run}
		_ = c.Client.DeleteAllOf(context.Background(), &v1.Sandbox{}, labelled)
		testcluster.Eventually(t, "the 2,000 sandboxes gone", func() (bool, string) {
			left := &metav1.PartialObjectMetadataList{}
			left.SetGroupVersionKind(v1.GroupVersion.WithKind("SandboxList"))
			err := c.Client.List(context.Background(), left, labelled)
			return err == nil && len(left.Items) == 0, fmt.Sprintf("%d left, %v", len(left.Items), err)
		})
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// The controllers write each sandbox's status once; the stream's
	// "that row alone" below holds only once they have written those the
	// filter shows, or a late first write arrives beside the stop.
	testcluster.Eventually(t, "the filtered sandboxes' first status", func() (bool, string) {
		for _, name := range mine {
			sbx := &v1.Sandbox{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, sbx); err != nil || sbx.Status.ObservedGeneration != sbx.Generation {
				return false, fmt.Sprintf("%s: status of generation %d, %v", name, sbx.Status.ObservedGeneration, err)
			}
		}
		return true, ""
	})
	url := serve(t, c.Config)

	start := time.Now()
	page := get(t, url+"/?view=all")
	t.Logf("the first page of %d sandboxes: %d KiB in %s", scaleSandboxes, len(page)/1024, time.Since(start).Round(time.Millisecond))
	if len(page) > 100*1024 {
		t.Errorf("the page is %d KiB with %d sandboxes, want at most 100", len(page)/1024, scaleSandboxes)
	}
	if rows := strings.Count(page, "<tr id=\"sandbox-"); rows != 50 {
		t.Errorf("the first page shows %d sandboxes, want 50", rows)
	}
	if m := regexp.MustCompile(`1–50 of (\d+)`).FindStringSubmatch(page); m == nil {
		t.Errorf("the page does not count its rows as 1–50 of N")
	} else if n, _ := strconv.Atoi(m[1]); n < scaleSandboxes {
		t.Errorf("the page counts 1–50 of %d, want at least %d", n, scaleSandboxes)
	}

	filtered := get(t, url+"/?view=all&sort=name&owner="+owner)
	shown := regexp.MustCompile(`data-sandbox="([^"]+)"`).FindAllStringSubmatch(filtered, -1)
	var names []string
	for _, m := range shown {
		names = append(names, m[1])
	}
	if !slices.Equal(names, mine) || !strings.Contains(filtered, fmt.Sprintf("1–%d of %d matching", len(mine), len(mine))) {
		t.Errorf("filtered by owner %s the page shows %v, want %v", owner, names, mine)
	}

	// The stream of the filtered view: after the first rows, a change to
	// one sandbox sends that row alone.
	events := ssetest.Open(t, url+"/events?view=all&sort=name&owner="+owner)
	first := nextRows(t, events)
	if len(first.Changed) != len(mine) {
		t.Fatalf("the stream's first rows: %d, want %d", len(first.Changed), len(mine))
	}
	c.Kubectl(t, "patch", "sandbox", mine[1], "--type=merge", "-p", `{"spec":{"state":"Stopped"}}`)
	update := nextRows(t, events)
	if len(update.Changed) != 1 || update.Changed[mine[1]] == "" || !strings.Contains(update.Changed[mine[1]], "<td>Stopped</td>") {
		t.Errorf("after one sandbox stopped the stream sent %v, want that row alone, Stopped", update.Changed)
	}
	t.Logf("a change to one of %d sandboxes sent %d bytes", scaleSandboxes, update.size)

	b := newBrowser(t, nil)
	b.do(chromedp.Navigate(url + "/?view=all&sort=name&owner=" + owner))
	eval[bool](b, `window.notReloaded = true`)
	b.wait("the live indicator", `document.getElementById("live").textContent === "live"`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll("#sandbox-rows tr").length`); n != len(mine) {
		t.Errorf("the filtered page shows %d rows, want %d", n, len(mine))
	}
	c.Kubectl(t, "patch", "sandbox", mine[2], "--type=merge", "-p", `{"spec":{"state":"Stopped"}}`)
	took := b.wait("the stop of one of 2,000 sandboxes", fmt.Sprintf(`document.querySelector(%q).cells[3].innerText === "Stopped"`, row("sandbox", mine[2])), 10*time.Second)
	t.Logf("a change reached the open page of %d sandboxes in %s", scaleSandboxes, took.Round(time.Millisecond))
	if err := c.Client.Delete(ctx, &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: mine[3]}}); err != nil {
		t.Fatal(err)
	}
	b.wait("a deleted sandbox's row gone", fmt.Sprintf(`document.querySelector(%q) === null && document.querySelectorAll("#sandbox-rows tr").length === %d`, row("sandbox", mine[3]), len(mine)-1), 30*time.Second)
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Error("the page reloaded to show the changes")
	}
}

// TestAnOpenPageAtRestIsSentNothing: with several templates and warm
// pools on the cluster and nothing changing, an open page is sent nothing,
// past the re-render for time alone (every 5 s). The cache gives its
// objects in no fixed order; rendered in that order, the tables were sent
// anew at every re-render (run 24 of make bench-scale: 21 events in 30 s).
func TestAnOpenPageAtRestIsSentNothing(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	var objects []client.Object
	for i := range 6 {
		tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name(fmt.Sprintf("rest-%d", i))},
			Spec: v1.SandboxTemplateSpec{Image: "ghcr.io/acme/rest:1"}}
		pool := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name(fmt.Sprintf("rest-%d", i))},
			Spec: v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To[int32](0)}}
		create(t, tpl)
		create(t, pool)
		objects = append(objects, tpl, pool)
	}
	testcluster.Eventually(t, "the templates' and pools' status written", func() (bool, string) {
		for _, obj := range objects {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return false, err.Error()
			}
			var observed int64
			switch o := obj.(type) {
			case *v1.SandboxTemplate:
				observed = o.Status.ObservedGeneration
			case *v1.WarmPool:
				observed = o.Status.ObservedGeneration
			}
			if observed != obj.GetGeneration() {
				return false, fmt.Sprintf("%s: status of generation %d of %d", obj.GetName(), observed, obj.GetGeneration())
			}
		}
		return true, ""
	})
	events := ssetest.Open(t, serve(t, c.Config)+"/events?view=all")
	events.Next(t, "section", 30*time.Second)
	// The first render's other sections, and any late status, until a
	// second passes without an event.
	for quiet := time.Now().Add(30 * time.Second); len(events.During(time.Second)) > 0; {
		if time.Now().After(quiet) {
			t.Fatal("the page's stream did not fall quiet within 30 s of opening")
		}
	}
	if sent := events.During(6 * time.Second); len(sent) > 0 {
		var what []string
		for _, ev := range sent {
			what = append(what, fmt.Sprintf("%s (%d bytes)", ev.Name, ev.Size))
		}
		t.Errorf("an open page at rest was sent %d events in 6 s: %s", len(sent), strings.Join(what, ", "))
	}
}

// get fetches url's body, which must be 200 OK.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, body)
	}
	return string(body)
}

// rowsUpdate is a rows event and its size on the wire.
type rowsUpdate struct {
	Order   []string          `json:"order"`
	Changed map[string]string `json:"changed"`
	size    int
}

// nextRows is the stream's next rows event.
func nextRows(t *testing.T, s *ssetest.Stream) rowsUpdate {
	t.Helper()
	ev := s.Next(t, "rows", 30*time.Second)
	u := rowsUpdate{size: ev.Size}
	if err := json.Unmarshal([]byte(ev.Data), &u); err != nil {
		t.Fatalf("a rows event that does not decode: %v\n%s", err, ev.Data)
	}
	return u
}
