package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/webui"
)

// The tests run the controllers in-process, serve the page as a developer
// (or the cluster's admin, for the installation's status) on loopback, and
// drive it with Debian's headless Chromium through the DevTools protocol.
func TestMain(m *testing.M) {
	reconciletest.Main(m, func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr, reconcile.Options{}) })
}

// serve starts the page for cfg's identity on a free loopback port and
// returns its URL.
func serve(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	srv, err := webui.New(cfg, webui.Options{Context: "test", Server: cfg.Host})
	if err != nil {
		t.Fatal(err)
	}
	if !srv.TerminalAvailable() {
		t.Fatal("the terminal emulator is not built in: run hack/web.sh (make test does) before go test")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

// browser is a headless Chromium tab that records every console error,
// uncaught exception and error the browser logs (a refused resource, a
// Content-Security-Policy violation).
type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// newBrowser starts Chromium for the test; it closes when the test ends,
// after failing the test for any error the page logged that allowed does not
// accept.
func newBrowser(t *testing.T, allowed func(*log.Entry) bool) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("the page tests need Debian's chromium (hack/test.sh installs it): ", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx}
	err = chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				b.errors = append(b.errors, fmt.Sprintf("console.error %s", describeArgs(ev.Args)))
			}
		case *runtime.EventExceptionThrown:
			b.errors = append(b.errors, fmt.Sprintf("uncaught %s %s", ev.ExceptionDetails.Text, describeException(ev.ExceptionDetails)))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError && (allowed == nil || !allowed(ev.Entry)) {
				b.errors = append(b.errors, fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.mu.Lock()
		errs := b.errors
		b.mu.Unlock()
		for _, e := range errs {
			t.Errorf("the page logged an error: %s", e)
		}
		cancel()
		cancelAlloc()
	})
	return b
}

func describeArgs(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if a.Value != nil {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}

func describeException(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}

// do runs actions in the tab, failing the test on error.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// wait polls the JavaScript expression until it is true, failing the test
// with what describe evaluates to when it is not within timeout.
func (b *browser) wait(what, expression string, timeout time.Duration) time.Duration {
	b.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+10*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expression, chromedp.WithPollingTimeout(timeout),
		chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		b.t.Fatalf("%s: not within %s (%v); the page shows:\n%s", what, timeout, err, body)
	}
	return time.Since(start)
}

// typeKeys types text into the focused element as a keyboard does: a
// keyDown carrying the character and a keyUp for each key, "\r" as Enter.
// (chromedp.SendKeys also sends a char event, which a terminal emulator
// reads as a second keystroke.)
func (b *browser) typeKeys(text string) {
	b.t.Helper()
	for _, r := range text {
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Text: string(r), Key: string(r)}
		if r == '\r' {
			down.Key, down.Code, down.WindowsVirtualKeyCode = "Enter", "Enter", 13
		}
		up := down
		up.Type, up.Text = input.DispatchKeyEventTypeKeyUp, ""
		for _, ev := range []input.DispatchKeyEventParams{down, up} {
			if _, err := chromedp.Call(b.ctx, input.DispatchKeyEvent, ev); err != nil {
				b.t.Fatal(err)
			}
		}
	}
}

// click clicks the element sel selects as soon as there is one. It clicks
// from inside the page, in one step with finding the element: the live
// sections are replaced whole when they change, so an element found by one
// DevTools call may be gone by the next.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.wait("a "+sel+" to click", fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (el) el.click(); return el !== null })()`, sel), 10*time.Second)
}

// submit fills the fields (by selector) and submits the form as one task
// in the page: a section the live stream swaps in between separate steps
// would leave the later ones acting on nodes that are gone ("No node with
// given id found").
func (b *browser) submit(form string, fields map[string]string) {
	b.t.Helper()
	values, err := json.Marshal(fields)
	if err != nil {
		b.t.Fatal(err)
	}
	b.wait("the form "+form+" filled and submitted", fmt.Sprintf(`(() => {
		const fields = Object.entries(%s).map(([sel, value]) => [document.querySelector(sel), value]);
		if (fields.some(([el]) => el === null)) return false;
		for (const [el, value] of fields) {
			el.value = value;
			el.dispatchEvent(new Event("change", {bubbles: true}));
		}
		document.querySelector(%q).requestSubmit();
		return true;
	})()`, values, form), 10*time.Second)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expression string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expression, err)
	}
	return v
}

// screenshot writes the page as PNG to the test's artifact directory
// (go test -artifacts keeps it; make test does).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	file := filepath.Join(b.t.ArtifactDir(), name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", file)
}

// row is the selector of the table row of a sandbox (or another kind, by
// its data attribute).
func row(attr, name string) string { return fmt.Sprintf(`tr[data-%s=%q]`, attr, name) }

// rowData is a JavaScript expression reading a data attribute of a row, or
// undefined while the row is not there.
func rowData(attr, name, field string) string {
	return fmt.Sprintf(`document.querySelector(%q)?.dataset.%s`, row(attr, name), field)
}

// cluster is the package's test cluster.
func cluster(t *testing.T) *testcluster.Cluster { return testcluster.Get(t) }
