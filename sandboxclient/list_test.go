package sandboxclient_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestListFiltersOnTheServerInConsistentPages: List's owner, template and
// phase filters are the API server's (selectable fields), its pages come
// from one snapshot, so sandboxes created and deleted while the pages are
// read never show twice nor push one out, and it reads every page.
func TestListFiltersOnTheServerInConsistentPages(t *testing.T) {
	tc := testcluster.Get(t)
	ctx := context.Background()
	sdk, err := sandboxclient.New(tc.Config)
	if err != nil {
		t.Fatal(err)
	}
	// A's sandboxes run (the phase filter is tried on them: they reach
	// one phase, and none is Failed); B's template does not exist.
	prefix := testcluster.Name("list")
	template, _ := newTemplate(t)
	tplA, tplB := template.Name, prefix+"-b"
	owner, other := prefix+"@example.com", prefix+"-other@example.com"
	create := func(name, template, owner string) {
		t.Helper()
		sbx := &v1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: template}, Owner: owner},
		}
		if err := tc.Client.Create(ctx, sbx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tc.Client.Delete(context.Background(), sbx) })
	}
	var fromA []string
	for i := range 7 {
		name := fmt.Sprintf("%s-a%d", prefix, i)
		create(name, tplA, owner)
		fromA = append(fromA, name)
	}
	for i := range 3 {
		create(fmt.Sprintf("%s-b%d", prefix, i), tplB, other)
	}
	names := func(list []v1.Sandbox) []string {
		var out []string
		for _, s := range list {
			out = append(out, s.Name)
		}
		return out
	}

	got, err := sdk.List(ctx, sandboxclient.ListOptions{Template: tplA, PageSize: 2})
	if err != nil || !slices.Equal(names(got), fromA) {
		t.Errorf("template %s in pages of 2: %v, %v; want %v", tplA, names(got), err, fromA)
	}
	got, err = sdk.List(ctx, sandboxclient.ListOptions{Owner: other})
	if err != nil || len(got) != 3 || got[0].Spec.TemplateRef.Name != tplB {
		t.Errorf("owner %s: %v, %v", other, names(got), err)
	}
	if got, err := sdk.List(ctx, sandboxclient.ListOptions{Owner: owner, Template: tplB}); err != nil || len(got) != 0 {
		t.Errorf("owner %s and template %s: %v, %v; want none", owner, tplB, names(got), err)
	}

	// Every sandbox of A comes to Running and stays there (an earlier
	// phase they share, Starting, may end between the wait and the list);
	// the filter finds them all in it and none in another.
	phase := v1.SandboxPhaseRunning
	testcluster.Eventually(t, "the sandboxes of "+tplA+" Running", func() (bool, string) {
		list, err := sdk.List(ctx, sandboxclient.ListOptions{Template: tplA})
		if err != nil {
			return false, err.Error()
		}
		phases := map[v1.SandboxPhase]int{}
		for _, s := range list {
			phases[s.Status.Phase]++
		}
		return phases[phase] == len(fromA), fmt.Sprint(phases)
	})
	if got, err := sdk.List(ctx, sandboxclient.ListOptions{Template: tplA, Phase: phase, PageSize: 3}); err != nil || len(got) != 7 {
		t.Errorf("phase %s: %v, %v", phase, names(got), err)
	}
	if got, err := sdk.List(ctx, sandboxclient.ListOptions{Template: tplA, Phase: v1.SandboxPhaseFailed}); err != nil || len(got) != 0 {
		t.Errorf("phase Failed: %v, %v; want none", names(got), err)
	}

	// Sandboxes of A come and go while pages of one are read: each list
	// still has every sandbox that stayed, once, and nothing of another
	// template.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churned atomic.Int64
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			sbx := &v1.Sandbox{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-churn%d", prefix, i)},
				Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tplA}, Owner: owner},
			}
			if tc.Client.Create(ctx, sbx) == nil {
				_ = tc.Client.Delete(ctx, sbx, client.GracePeriodSeconds(0))
				churned.Add(1)
			}
		}
	})
	for range 10 {
		got, err := sdk.List(ctx, sandboxclient.ListOptions{Template: tplA, PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, s := range got {
			seen[s.Name]++
			if seen[s.Name] > 1 {
				t.Errorf("%s listed twice", s.Name)
			}
			if s.Spec.TemplateRef.Name != tplA {
				t.Errorf("%s of template %s listed", s.Name, s.Spec.TemplateRef.Name)
			}
		}
		for _, name := range fromA {
			if seen[name] != 1 {
				t.Errorf("%s, which stayed, is missing from a list read while others came and went", name)
			}
		}
	}
	close(stop)
	wg.Wait()
	if churned.Load() == 0 {
		t.Error("no sandbox came and went while the lists were read: the test proved nothing")
	}
}
