package webui_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
)

// TestInstallationStatus: the page tells an installed API and policies from
// a missing CRD, and a running reconciler from a stopped one. It runs alone
// (not in parallel): it deletes a CRD of the package's cluster and puts it
// back.
func TestInstallationStatus(t *testing.T) {
	c := cluster(t)
	url := serve(t, c.Config)
	b := newBrowser(t, nil)
	b.do(chromedp.Navigate(url))

	part := func(name string) string { return fmt.Sprintf(`document.querySelector('tr[data-part=%q]')`, name) }
	health := func(name string) string { return part(name) + `?.dataset.health` }
	for _, kind := range []string{"sandboxes", "sandboxtemplates", "warmpools", "nodepools", "gitsyncs"} {
		crd := "CRD " + kind + ".agentsandbox.dev"
		b.wait(crd+" current", health(crd)+` === "ok"`, 10*time.Second)
	}
	policies := `[...document.querySelectorAll('tr[data-part*="AdmissionPolicy"]')]`
	b.wait("the admission policies and bindings, installed", policies+`.length >= 4 && `+policies+`.every(r => r.dataset.health === "ok")`, 10*time.Second)

	// A reconciler elected leader, as `agentsandbox reconcile` is, then
	// stopped (it releases the lead).
	mgr, err := reconcile.NewManager(c.Config, reconcile.ManagerOptions{LeaderElection: true, LeaderElectionNamespace: v1.SystemNamespace})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(stop)
	b.wait("the reconciler running", health("Reconciler")+` === "ok" && `+part("Reconciler")+`.innerText.includes("running:")`, time.Minute)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("reconciler: %v", err)
	}
	b.wait("the reconciler stopped", health("Reconciler")+` === "bad" && `+part("Reconciler")+`.innerText.includes("stopped")`, 20*time.Second)
	b.screenshot("installation")

	// A CRD deleted, then installed again.
	gitsyncs := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gitsyncs.agentsandbox.dev"}}
	t.Cleanup(func() {
		if err := testcluster.InstallCRDs(context.Background(), c.Client); err != nil {
			t.Errorf("reinstall the CRDs: %v", err)
		}
	})
	if err := c.Client.Delete(context.Background(), gitsyncs); err != nil {
		t.Fatal(err)
	}
	b.wait("the missing CRD", health("CRD gitsyncs.agentsandbox.dev")+` === "bad" && `+part("CRD gitsyncs.agentsandbox.dev")+`.innerText.includes("not installed")`, time.Minute)
	b.wait("the Git syncs table, not installed", `document.getElementById("gitsyncs").innerText.includes("Not installed")`, 20*time.Second)
	if err := testcluster.InstallCRDs(context.Background(), c.Client); err != nil {
		t.Fatal(err)
	}
	b.wait("the CRD back", health("CRD gitsyncs.agentsandbox.dev")+` === "ok"`, time.Minute)
	b.wait("the Git syncs table back", `!document.getElementById("gitsyncs").innerText.includes("Not installed")`, 20*time.Second)
}
