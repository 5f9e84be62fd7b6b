package webui

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
)

func TestLeaseCheck(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder),
			LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: now.Add(-renewedAgo)}}}
	}
	watching := access{Watching: true}
	for name, tc := range map[string]struct {
		lease  *coordinationv1.Lease
		seen   access
		health string
		detail string
	}{
		"renewing":           {lease("pod-a", 2*time.Second), watching, healthOK, "running: pod-a holds the lead"},
		"stopped renewing":   {lease("pod-a", 40*time.Second), watching, healthBad, "not renewing: pod-a held the lead"},
		"released":           {lease("", time.Minute), watching, healthBad, "stopped: the last reconciler released the lead"},
		"never ran":          {nil, watching, healthBad, "no reconciler has run"},
		"may not read Lease": {nil, access{Err: "leases is forbidden"}, healthUnknown, "hidden from you: leases is forbidden"},
	} {
		c := leaseCheck(tc.lease, tc.seen, now)
		if c.Health != tc.health || !strings.HasPrefix(c.Detail, tc.detail) {
			t.Errorf("%s: %s %q, want %s %q", name, c.Health, c.Detail, tc.health, tc.detail)
		}
		if tc.lease != nil && (c.When == nil || !c.When.Equal(tc.lease.Spec.RenewTime.Time)) {
			t.Errorf("%s: the line's time is %v, want the last renewal %v", name, c.When, tc.lease.Spec.RenewTime)
		}
	}
}

func TestCRDChecks(t *testing.T) {
	want, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	installed := func(mutate func(*apiextensionsv1.CustomResourceDefinition)) []apiextensionsv1.CustomResourceDefinition {
		var have []apiextensionsv1.CustomResourceDefinition
		for _, c := range want {
			c = c.DeepCopy()
			if mutate != nil {
				mutate(c)
			}
			have = append(have, *c)
		}
		return have
	}
	first := want[0].Name
	for name, tc := range map[string]struct {
		have   []apiextensionsv1.CustomResourceDefinition
		seen   access
		health string
		detail string
	}{
		"current": {installed(nil), access{Watching: true}, healthOK, "installed, v1alpha1 as this binary expects"},
		"missing": {installed(nil)[1:], access{Watching: true}, healthBad, "not installed"},
		"another release": {installed(func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "older"
		}), access{Watching: true}, healthBad, "installed, but its v1alpha1 schema is not the one this binary was built with"},
		"not served": {installed(func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Served = false }),
			access{Watching: true}, healthBad, "installed, but v1alpha1 is not served"},
	} {
		checks := crdChecks(want, tc.have, tc.seen)
		if len(checks) != len(want) || checks[0].Part != "CRD "+first {
			t.Fatalf("%s: %d checks, first %q; want one per CRD, %s first", name, len(checks), checks[0].Part, first)
		}
		if c := checks[0]; c.Health != tc.health || c.Detail != tc.detail {
			t.Errorf("%s: %s %q, want %s %q", name, c.Health, c.Detail, tc.health, tc.detail)
		}
		if checks[0].Health == healthBad && !strings.Contains(checks[0].Fix, installCommand) {
			t.Errorf("%s: fix %q does not say how to install", name, checks[0].Fix)
		}
	}
}

func TestHiddenPartsAreOneLineEach(t *testing.T) {
	want, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	hidden := access{Err: "customresourcedefinitions is forbidden"}
	if diff := cmp.Diff([]check{{Part: "CRDs", Health: healthUnknown, Detail: "hidden from you: customresourcedefinitions is forbidden"}},
		crdChecks(want, nil, hidden)); diff != "" {
		t.Errorf("CRDs hidden (-want +got):\n%s", diff)
	}
	policies, err := config.Admission()
	if err != nil {
		t.Fatal(err)
	}
	if got := policyChecks(policies, "ValidatingAdmissionPolicy", nil, hidden); len(got) != 1 || got[0].Part != "ValidatingAdmissionPolicies" {
		t.Errorf("policies hidden: %+v", got)
	}
	if got := policyChecks(policies, "ValidatingAdmissionPolicy", nil, access{Watching: true}); len(got) != 1 || got[0].Health != healthBad || got[0].Fix != installCommand {
		t.Errorf("policy missing: %+v", got)
	}
}

func TestEgressSummary(t *testing.T) {
	for want, n := range map[string]v1.Network{
		"none":     {},
		"DNS only": {ClusterDNS: ptr.To(true)},
		"0.0.0.0/0 except 10.0.0.0/8 port 443; 192.0.2.0/24 port 8000-8080": {Egress: []v1.EgressRule{
			{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}, Ports: []v1.NetworkPort{{Port: 443}}},
			{CIDR: "192.0.2.0/24", Ports: []v1.NetworkPort{{Port: 8000, EndPort: ptr.To[int32](8080)}}},
		}},
		"pypi.org, *.pythonhosted.org port 443; service models/vllm; endpoint openai → https://api.openai.com (key brokered)": {
			Egress: []v1.EgressRule{
				{Hosts: []string{"pypi.org", "*.pythonhosted.org"}, Ports: []v1.NetworkPort{{Port: 443}}},
				{Service: &v1.ServiceReference{Namespace: "models", Name: "vllm"}},
			},
			Endpoints: []v1.Endpoint{{Name: "openai", URL: "https://api.openai.com", Credential: &v1.EndpointCredential{}}},
		},
		"endpoint local → http://vllm.models.svc:8000": {Endpoints: []v1.Endpoint{{Name: "local", URL: "http://vllm.models.svc:8000"}}},
	} {
		if got := egressSummary(n); got != want {
			t.Errorf("egressSummary: %q, want %q", got, want)
		}
	}
}

func TestNewSandboxForm(t *testing.T) {
	for form, want := range map[newSandbox]string{
		{From: "pool/warm"}:                       "",
		{From: "template/py", Lifetime: "1h30m"}:  "",
		{From: ""}:                                `from "": choose a template or a warm pool`,
		{From: "image/python"}:                    `from "image/python": choose a template or a warm pool`,
		{From: "pool/warm", Lifetime: "tomorrow"}: `lifetime "tomorrow": not a positive duration`,
		{From: "template/py", Lifetime: "-1h"}:    `lifetime "-1h": not a positive duration`,
	} {
		opts, err := form.claimOptions()
		switch {
		case want == "" && err != nil:
			t.Errorf("%+v: %v", form, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%+v: %v, want %q", form, err, want)
		}
		if want == "" && form.Lifetime == "1h30m" && opts.TTL != 90*time.Minute {
			t.Errorf("lifetime 1h30m became %v", opts.TTL)
		}
	}
}

// TestSandboxView: the page's query picks whose sandboxes, filters them by
// owner, template (directly or through a warm pool), phase and part of the
// name, orders them, and pages them; a query it cannot read is refused,
// naming the value and what it takes.
func TestSandboxView(t *testing.T) {
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 2, 12, min, 0, 0, time.UTC)) }
	sandbox := func(name, owner string, created metav1.Time) v1.Sandbox {
		return v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}, Spec: v1.SandboxSpec{Owner: owner,
			TemplateRef: &v1.LocalObjectReference{Name: "py"}}}
	}
	items := []v1.Sandbox{sandbox("a", "alice", at(1)), sandbox("b", "bob", at(2)), sandbox("c", "alice", at(3))}
	items[1].Spec.TemplateRef, items[1].Spec.WarmPoolRef = nil, &v1.LocalObjectReference{Name: "warm"}
	items[1].Status.Phase = v1.SandboxPhaseRunning
	pools := map[string]string{"warm": "node"}
	names := func(p sandboxPage) []string {
		var out []string
		for _, r := range p.Rows {
			out = append(out, r.Name)
		}
		return out
	}
	view := func(query string) sandboxView {
		t.Helper()
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		v, err := parseView(q)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return v
	}
	for query, want := range map[string][]string{
		"":                       {"c", "a"},
		"view=all":               {"c", "b", "a"},
		"view=all&sort=name":     {"a", "b", "c"},
		"view=all&sort=oldest":   {"a", "b", "c"},
		"view=all&owner=bob":     {"b"},
		"view=all&template=node": {"b"},
		"view=all&template=py":   {"c", "a"},
		"view=all&phase=Running": {"b"},
		"phase=Requested":        {"c", "a"},
		"view=all&name=B":        {"b"},
	} {
		if diff := cmp.Diff(want, names(view(query).page(items, "alice", pools))); diff != "" {
			t.Errorf("%q (-want +got):\n%s", query, diff)
		}
	}
	all := view("view=all").page(items, "alice", pools)
	if all.Rows[1].Mine || !all.Rows[0].Mine || all.Rows[0].Phase != "Requested" || all.Rows[0].From != "template py" {
		t.Errorf("rows: %+v", all.Rows)
	}
	if filtered := view("view=all&owner=bob").page(items, "alice", pools); filtered.Matching != 1 || filtered.Total != 3 || !filtered.Filtered() {
		t.Errorf("a filtered page counts %d of %d (filtered %t), want 1 of 3", filtered.Matching, filtered.Total, filtered.Filtered())
	}

	var many []v1.Sandbox
	for i := range 2*pageSize + 3 {
		many = append(many, sandbox(fmt.Sprintf("s%03d", i), "alice", at(i%60)))
	}
	second := view("sort=name&page=2").page(many, "alice", nil)
	if second.First != pageSize+1 || second.Last != 2*pageSize || second.Rows[0].Name != fmt.Sprintf("s%03d", pageSize) ||
		second.Prev != "/?sort=name" || second.Next != "/?page=3&sort=name" {
		t.Errorf("page 2: rows %d–%d from %s, prev %q, next %q", second.First, second.Last, second.Rows[0].Name, second.Prev, second.Next)
	}
	if last := view("sort=name&page=3").page(many, "alice", nil); len(last.Rows) != 3 || last.Next != "" {
		t.Errorf("the last page has %d rows, next %q", len(last.Rows), last.Next)
	}

	for query, want := range map[string]string{
		"sort=size":    `sort="size": want one of newest, oldest, name, owner, phase`,
		"phase=Gone":   `phase="Gone": want one of Requested, Pending`,
		"page=0":       `page="0": want a page number from 1`,
		"view=friends": `view="friends": want mine or all`,
	} {
		q, _ := url.ParseQuery(query)
		if _, err := parseView(q); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", query, err, want)
		}
	}
}

func TestChangesState(t *testing.T) {
	for req, want := range map[[2]string]bool{
		{"GET", "/"}:                         false,
		{"GET", "/events"}:                   false,
		{"GET", "/api/sandboxes/x/logs"}:     false,
		{"GET", "/api/sandboxes/x/terminal"}: true,
		{"POST", "/api/sandboxes"}:           true,
		{"DELETE", "/api/sandboxes/x"}:       true,
		{"PUT", "/anything"}:                 true,
	} {
		if got := changesState(httptest.NewRequest(req[0], req[1], nil)); got != want {
			t.Errorf("%s %s: changesState %v, want %v", req[0], req[1], got, want)
		}
	}
}

// A sandbox no node takes shows as Failed with the scheduler's words, as
// every client judges it (v1alpha1.Readiness).
func TestSandboxRowSaysWhyNoNodeTakesIt(t *testing.T) {
	why := "no node can take the pod (the scheduler has said so since 2026-12-02T12:00:00Z): 0/4 nodes are available: 1 Insufficient cpu"
	s := &v1.Sandbox{Spec: v1.SandboxSpec{Owner: "alice", TemplateRef: &v1.LocalObjectReference{Name: "py"}},
		Status: v1.SandboxStatus{Phase: v1.SandboxPhaseStarting, Conditions: []metav1.Condition{
			{Type: v1.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1.ReasonUnschedulable, Message: why}}}}
	row := newSandboxRow(s, "alice")
	if row.Ready.Ready || !row.Ready.Failed || row.Ready.Message != why {
		t.Errorf("row of an unschedulable sandbox: %+v, want Failed with the scheduler's words", row.Ready)
	}
}

// A developer who may read none of the installation's parts reads one line
// saying so, not a refusal for each; what they may read stays.
func TestHiddenChecksAreOneLine(t *testing.T) {
	hidden := func(part string) check {
		return check{Part: part, Health: healthUnknown, Detail: hiddenPrefix + part + " is forbidden"}
	}
	pool := check{Part: "Node pool gvisor", Health: healthOK, Detail: "RuntimeClass gvisor"}
	got := summarizeHidden([]check{hidden("CRDs"), hidden("ValidatingAdmissionPolicies"), hidden("Reconciler"), pool})
	want := []check{
		{Part: "Installation", Health: healthUnknown, Detail: "visible to cluster admins: you may not read CRDs, ValidatingAdmissionPolicies, Reconciler"},
		pool,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summarized checks (-want +got):\n%s", diff)
	}
	one := []check{hidden("Reconciler"), pool}
	if diff := cmp.Diff(one, summarizeHidden(one)); diff != "" {
		t.Errorf("a single hidden check changed (-want +got):\n%s", diff)
	}
}

// TestSandboxRowSaysWhenItStopsForIdleness: the Idle column shows the last
// use and the idle stop to come as times the page makes relative ("3m
// ago", "in 12m"), that a sandbox stopped for idleness and whether using it
// starts it (Start starts it, Stop makes it its owner's stop), and "no
// timeout" without one.
func TestSandboxRowSaysWhenItStopsForIdleness(t *testing.T) {
	pages, err := template.New("page").Funcs(templateFuncs).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	used := metav1.NewTime(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	stopAt := metav1.NewTime(used.Add(15 * time.Minute))
	running := v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "running"}, Spec: v1.SandboxSpec{Owner: "alice"}}
	running.Status.Phase, running.Status.LastActivityAt = v1.SandboxPhaseRunning, &used
	running.Status.Idle = &v1.IdleStatus{Timeout: metav1.Duration{Duration: 15 * time.Minute}, StopAt: &stopAt, WakeOnConnect: true}
	stopped := v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "stopped"}, Spec: v1.SandboxSpec{Owner: "alice"}}
	stopped.Status.Phase = v1.SandboxPhaseStopped
	stopped.Status.Idle = &v1.IdleStatus{Timeout: metav1.Duration{Duration: 15 * time.Minute}, WakeOnConnect: true}
	stopped.Status.Conditions = []metav1.Condition{{Type: v1.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1.ReasonIdleTimeout}}
	plain := v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: v1.SandboxSpec{Owner: "alice"}}
	snap := &snapshot{SandboxesAccess: access{Watching: true}, Sandboxes: sandboxView{}.page([]v1.Sandbox{running, stopped, plain}, "alice", nil)}
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "sandboxes", snap); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{
		`<th>Idle</th>`,
		`last used <time datetime="2026-12-04T12:00:00Z">`,
		`stops <time datetime="2026-12-04T12:15:00Z">`,
		`stopped after 15m unused; using it starts it`,
		`<button data-action="start" data-name="stopped">Start</button> <button data-action="stop" data-name="stopped">Stop</button>`,
		`no timeout`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the sandboxes table lacks %q:\n%s", want, html)
		}
	}
}

// BenchmarkSandboxPage is the server's part of a render of the sandboxes
// at 10,000: the view's filter, sort and page over the cache's objects,
// and the section's HTML (the API server is not asked: the page renders
// from its watch cache). It reports the HTML's size.
//
//	go test -run '^$' -bench SandboxPage ./webui/
func BenchmarkSandboxPage(b *testing.B) {
	pages, err := template.New("page").Funcs(templateFuncs).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		b.Fatal(err)
	}
	items := make([]v1.Sandbox, 10000)
	for i := range items {
		items[i] = v1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sandbox-%05d", i), CreationTimestamp: metav1.NewTime(time.Unix(int64(1_800_000_000+i), 0))},
			Spec:       v1.SandboxSpec{Owner: fmt.Sprintf("user%d@example.com", i%100), TemplateRef: &v1.LocalObjectReference{Name: "py"}},
		}
		items[i].Status.Phase = v1.SandboxPhases[i%len(v1.SandboxPhases)]
	}
	for _, query := range []string{"view=all", "view=all&owner=user7@example.com&sort=name"} {
		b.Run(query, func(b *testing.B) {
			q, _ := url.ParseQuery(query)
			view, err := parseView(q)
			if err != nil {
				b.Fatal(err)
			}
			var size int
			for b.Loop() {
				snap := &snapshot{SandboxesAccess: access{Watching: true}, Sandboxes: view.page(items, "alice", nil)}
				var buf bytes.Buffer
				if err := pages.ExecuteTemplate(&buf, "sandboxes", snap); err != nil {
					b.Fatal(err)
				}
				size = buf.Len()
			}
			b.ReportMetric(float64(size)/1024, "KiB")
		})
	}
}
