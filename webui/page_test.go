package webui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// create makes obj as the admin and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	c := cluster(t).Client
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}

// TestPageShowsTheClusterAndFollowsIt: what was created through the API is
// on the page, and a change made afterwards appears without a reload.
func TestPageShowsTheClusterAndFollowsIt(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("gvisor")},
		Spec: v1.NodePoolSpec{RuntimeHandler: "runsc", NodeSelector: map[string]string{"agentsandbox.dev/test-pool": testcluster.Name("none")}}}
	create(t, pool)
	tpl, _ := c.ExecTemplate(t)
	warm := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("warm")},
		Spec: v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To[int32](1)}}
	create(t, warm)
	sync := &v1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("sync")},
		Spec: v1.GitSyncSpec{URL: "http://127.0.0.1:9/nothing-listens-here.git", Interval: metav1.Duration{Duration: time.Hour}}}
	create(t, sync)
	alice := c.Developers(t, "alice")[0]
	_, sbx := alice.Claim(t, tpl.Name)

	url := serve(t, c.Config) // the admin sees everything, the installation too
	b := newBrowser(t, nil)
	b.do(chromedp.Navigate(url + "/?view=all"))
	eval[bool](b, `window.notReloaded = true`)

	b.wait("the node pool in the installation status", fmt.Sprintf(`document.querySelector('tr[data-part="Node pool %s"]') !== null`, pool.Name), 10*time.Second)
	b.wait("the template, Ready", rowData("template", tpl.Name, "ready")+` === "true"`, 30*time.Second)
	b.wait("the warm pool with its member Ready", rowData("warmpool", warm.Name, "members")+` === "1/1"`, time.Minute)
	b.wait("the Git sync, failing with its message", fmt.Sprintf(`document.querySelector(%q)?.innerText.includes("127.0.0.1:9")`, row("gitsync", sync.Name)), time.Minute)
	b.wait("alice's sandbox, Running", rowData("sandbox", sbx.Name, "phase")+` === "Running"`, 30*time.Second)
	if owner := eval[string](b, fmt.Sprintf(`document.querySelector(%q).cells[1].innerText`, row("sandbox", sbx.Name))); owner != alice.Name {
		t.Errorf("owner column: %q, want %q", owner, alice.Name)
	}
	b.wait("the live indicator", `document.getElementById("live").textContent === "live"`, 10*time.Second)
	b.screenshot("overview")

	// A change made with the API (as kubectl would) reaches the open page.
	later := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("later")},
		Spec: v1.SandboxTemplateSpec{Image: "ghcr.io/acme/later:1"}}
	create(t, later)
	took := b.wait("a template created after the page loaded", fmt.Sprintf(`document.querySelector(%q) !== null`, row("template", later.Name)), 10*time.Second)
	t.Logf("a new template appeared on the open page %s after it was created", took.Round(time.Millisecond))
	c.Kubectl(t, "patch", "sandbox", sbx.Name, "--type=merge", "-p", `{"spec":{"state":"Stopped"}}`)
	b.wait("the stop made with kubectl", rowData("sandbox", sbx.Name, "phase")+` === "Stopped"`, time.Minute)
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Error("the page reloaded to show the changes")
	}
}

// TestNewSandboxStopStartDeleteAndTerminal drives a sandbox's whole life
// from the page as its owner.
func TestNewSandboxStopStartDeleteAndTerminal(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	tpl, _ := c.ExecTemplate(t)
	alice := c.Developers(t, "alice")[0]
	url := serve(t, alice.Config)
	b := newBrowser(t, nil)
	b.do(chromedp.Navigate(url))
	name := testcluster.Name("page")
	t.Cleanup(func() {
		_ = c.Client.Delete(context.Background(), &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})

	choice := "template/" + tpl.Name
	b.wait("the template among the choices", fmt.Sprintf(`[...document.querySelectorAll("#choices option")].some(o => o.value === %q)`, choice), 30*time.Second)
	b.submit("#new-sandbox", map[string]string{
		"#choices select": choice, "#new-sandbox input[name=name]": name, "#new-sandbox input[name=lifetime]": "2h",
	})
	b.wait("the new sandbox, Ready", `document.getElementById("progress").textContent.includes("is Ready")`, time.Minute)
	sbx := &v1.Sandbox{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, sbx); err != nil {
		t.Fatal(err)
	}
	if sbx.Spec.Owner != alice.Name || sbx.Spec.TTL == nil || sbx.Spec.TTL.Duration != 2*time.Hour {
		t.Errorf("the form made owner %q, ttl %v; want %q and 2h", sbx.Spec.Owner, sbx.Spec.TTL, alice.Name)
	}
	if by := sbx.Annotations[v1.AnnotationChangedBy]; by != alice.Name {
		t.Errorf("changed-by %q, want %q: the page must act as its user", by, alice.Name)
	}

	// The terminal: a typed command's output, then a resize the shell sees.
	b.click(row("sandbox", name) + ` button[data-action=terminal]`)
	b.wait("the terminal connected", `document.getElementById("terminal-status").textContent === "connected"`, 30*time.Second)
	b.typeKeys("echo answer-$((6*7))\r")
	b.wait("the command's output in the terminal", `document.querySelector("#terminal .xterm-rows").innerText.includes("answer-42")`, 20*time.Second)
	before := eval[string](b, `session.term.rows + " " + session.term.cols`)
	b.do(chromedp.EmulateViewport(1600, 1200))
	b.wait("the terminal resized", fmt.Sprintf(`session.term.rows + " " + session.term.cols !== %q`, before), 10*time.Second)
	size := eval[string](b, `session.term.rows + " " + session.term.cols`)
	b.typeKeys("stty size\r")
	b.wait("the shell sees the new size", fmt.Sprintf(`document.querySelector("#terminal .xterm-rows").innerText.includes(%q)`, size), 20*time.Second)
	b.screenshot("terminal")
	b.typeKeys("exit 3\r")
	b.wait("the shell's exit", `document.getElementById("terminal-status").textContent.includes("code 3")`, 20*time.Second)
	b.click(`#terminal-close`)

	// Stop, with confirmation: the pod goes, the sandbox stays.
	b.click(row("sandbox", name) + ` button[data-action=stop]`)
	b.wait("the confirmation", `document.getElementById("confirm").open`, 5*time.Second)
	b.click(`#confirm-ok`)
	b.wait("the sandbox Stopped", rowData("sandbox", name, "phase")+` === "Stopped"`, time.Minute)
	b.click(row("sandbox", name) + ` button[data-action=start]`)
	b.wait("the sandbox Running again", rowData("sandbox", name, "phase")+` === "Running" && `+rowData("sandbox", name, "ready")+` === "true"`, time.Minute)

	// Logs and the SSH/CLI help.
	b.click(row("sandbox", name) + ` button[data-action=connect]`)
	b.wait("the SSH command", fmt.Sprintf(`document.getElementById("text-body").textContent.includes("ssh %s.sandbox")`, name), 5*time.Second)
	b.click(`#text-close`)
	b.click(row("sandbox", name) + ` button[data-action=logs]`)
	b.wait("the logs dialog", `document.getElementById("text-dialog").open && document.getElementById("text-title").textContent.startsWith("Logs")`, 10*time.Second)
	b.click(`#text-close`)

	// Delete, with confirmation.
	b.click(row("sandbox", name) + ` button[data-action=delete]`)
	b.wait("the confirmation", `document.getElementById("confirm").open`, 5*time.Second)
	b.click(`#confirm-ok`)
	b.wait("the sandbox gone", fmt.Sprintf(`document.querySelector(%q) === null`, row("sandbox", name)), 2*time.Minute)
}

// TestSomeoneElsesSandboxIsRefused: bob sees alice's sandbox but may not
// stop, delete or open a terminal in it, and the page says why in the API
// server's words.
func TestSomeoneElsesSandboxIsRefused(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	tpl, _ := c.ExecTemplate(t)
	devs := c.Developers(t, "alice", "bob")
	alice, bob := devs[0], devs[1]
	_, sbx := alice.Claim(t, tpl.Name)

	url := serve(t, bob.Config)
	// The browser logs each refused request (403) as a failed resource;
	// those are the refusals this test makes, not errors of the page.
	refusal := func(e *log.Entry) bool {
		return e.Source == log.EntrySourceNetwork && strings.Contains(e.URL, "/api/sandboxes/"+sbx.Name)
	}
	b := newBrowser(t, refusal)
	b.do(chromedp.Navigate(url))
	b.wait("no sandboxes of bob's own", `document.getElementById("sandboxes").innerText.includes("You have no sandboxes")`, 10*time.Second)
	// bob is no cluster admin: one line says the installation is theirs to
	// see, not a refusal for each part.
	b.wait("the installation summary", `document.querySelector('tr[data-part="Installation"]')?.innerText.includes("visible to cluster admins")`, 10*time.Second)
	if install := eval[string](b, `document.getElementById("install").innerText`); strings.Contains(install, "forbidden") {
		t.Errorf("the installation status shows bob the API server's refusals:\n%s", install)
	}
	b.do(chromedp.Navigate(url + "/?view=all"))
	b.wait("alice's sandbox in all", rowData("sandbox", sbx.Name, "phase")+` === "Running"`, 30*time.Second)
	if eval[bool](b, fmt.Sprintf(`document.querySelector(%q) !== null`, row("sandbox", sbx.Name)+` button[data-action=connect]`)) {
		t.Error("the page offers bob the SSH command for alice's sandbox")
	}

	for _, action := range []string{"stop", "delete"} {
		b.click(row("sandbox", sbx.Name) + ` button[data-action=` + action + `]`)
		b.wait("the confirmation", `document.getElementById("confirm").open`, 5*time.Second)
		b.click(`#confirm-ok`)
		want := fmt.Sprintf("belongs to %s, not to %s", alice.Name, bob.Name) // the admission policy's words
		b.wait("the refusal of "+action, fmt.Sprintf(`document.getElementById("notice").textContent.includes(%q)`, want), 10*time.Second)
		notice := eval[string](b, `document.getElementById("notice").textContent`)
		if !strings.HasPrefix(notice, "Could not "+action) {
			t.Errorf("notice %q does not say which action was refused", notice)
		}
		eval[string](b, `document.getElementById("notice").textContent = ""`)
	}
	b.click(row("sandbox", sbx.Name) + ` button[data-action=terminal]`)
	b.wait("the terminal refused", `document.getElementById("terminal-status").textContent.startsWith("refused:")`, 20*time.Second)
	status := eval[string](b, `document.getElementById("terminal-status").textContent`)
	if !strings.Contains(status, "may not connect to sandbox "+sbx.Name) || !strings.Contains(status, "not its owner ("+alice.Name+")") {
		t.Errorf("terminal status %q does not say bob may not connect to alice's sandbox", status)
	}
	b.screenshot("refused")

	got := &v1.Sandbox{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: sbx.Name}, got); err != nil {
		t.Fatalf("alice's sandbox after bob's attempts: %v", err)
	}
	if got.Spec.State == v1.SandboxStopped || got.DeletionTimestamp != nil {
		t.Errorf("bob's refused actions changed alice's sandbox: state %s, deleting %v", got.Spec.State, got.DeletionTimestamp != nil)
	}
}

// TestOpenPageCostsNoRequests: an open page is served from the watches; once
// they run, the API server hears nothing from it but the watch streams
// already open, however long it stays open (here: past the re-render for
// time alone, which reads the cache only).
func TestOpenPageCostsNoRequests(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	var mu sync.Mutex
	var requests []string
	cfg := rest.CopyConfig(c.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			requests = append(requests, r.Method+" "+r.URL.RequestURI())
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	url := serve(t, cfg)
	b := newBrowser(t, nil)
	b.do(chromedp.Navigate(url + "/?view=all"))
	b.wait("the live indicator", `document.getElementById("live").textContent === "live"`, 10*time.Second)
	time.Sleep(time.Second) // the watches' first requests settle
	mu.Lock()
	before := len(requests)
	mu.Unlock()
	time.Sleep(6 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if later := requests[before:]; len(later) > 0 {
		t.Errorf("the open page made %d requests to the API server in 6 s: %v", len(later), later)
	}
	// Each kind is watched twice to start: once by the probe of whether
	// the caller may (which stops at once), once by its informer. More
	// means the page probed again for nothing (as it once did for every
	// CRD of the informer's first list).
	watchesOf := map[string]int{}
	for _, r := range requests {
		if path, query, _ := strings.Cut(r, "?"); strings.Contains(query, "watch=true") {
			watchesOf[path]++
		}
	}
	for path, n := range watchesOf {
		if n > 2 {
			t.Errorf("the page watched %s %d times to start, not twice", path, n)
		}
	}
	t.Logf("%d requests in all to start, watching %d kinds", len(requests), len(watchesOf))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
