package webui

import (
	"bytes"
	"context"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// sectionIDs are the parts of the page that change with the cluster, each
// a template of the same name and an element with that id; the events
// stream sends one again when its HTML changed. The sandboxes' rows are
// sent one by one (rowsEvent), their frame (filter, counts, pager) as the
// section sandbox-frame.
var sectionIDs = []string{"install", "templates", "warmpools", "gitsyncs", "choices"}

// parts says which parts of the page a render reads and builds: the
// sandboxes (the view's page of them), and the rest.
type parts struct{ sandboxes, rest bool }

// allParts is the whole page.
var allParts = parts{sandboxes: true, rest: true}

// snapshot is what the page shows at one moment, read from the watch cache.
type snapshot struct {
	Context, Server, User, CSRF string
	// Mine: the view shows the caller's own sandboxes only.
	Mine     bool
	Terminal bool

	Install   []check
	Templates []templateRow
	WarmPools []warmPoolRow
	GitSyncs  []gitSyncRow
	Sandboxes sandboxPage
	// Access of each table's kind: why a table is empty when it may not
	// be read.
	TemplatesAccess, WarmPoolsAccess, GitSyncsAccess, SandboxesAccess access
	// ReadyTemplates and ReadyPools are what a new sandbox may come from.
	ReadyTemplates, Pools []string
}

// snapshot reads what the page shows of what is from the cache: the
// view's page of sandboxes, and the rest.
func (s *Server) snapshot(ctx context.Context, view sandboxView, what parts) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	user := s.sdk.User(ctx)
	view.Mine = view.Mine && user != ""
	snap := &snapshot{Context: s.opts.Context, Server: s.opts.Server, User: user, CSRF: s.csrf,
		Mine: view.Mine, Terminal: s.terminal}

	// Read without copies: the rows copy what they show, and nothing
	// here changes the cache's objects.
	warmPools := &v1.WarmPoolList{}
	var err error
	if snap.WarmPoolsAccess, err = s.hub.list(ctx, kindWarmPools, warmPools, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	byName(warmPools.Items)
	if what.sandboxes {
		templateOf := map[string]string{}
		for _, p := range warmPools.Items {
			templateOf[p.Name] = p.Spec.TemplateRef.Name
		}
		sandboxes := &v1.SandboxList{}
		if snap.SandboxesAccess, err = s.hub.list(ctx, kindSandboxes, sandboxes, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		snap.Sandboxes = view.page(sandboxes.Items, user, templateOf)
	}
	if !what.rest {
		return snap, nil
	}
	for i := range warmPools.Items {
		snap.WarmPools = append(snap.WarmPools, newWarmPoolRow(&warmPools.Items[i]))
		snap.Pools = append(snap.Pools, warmPools.Items[i].Name)
	}

	nodePools := &v1.NodePoolList{}
	nodePoolAccess, err := s.hub.list(ctx, kindNodePools, nodePools)
	if err != nil {
		return nil, err
	}
	byName(nodePools.Items)
	pools := map[string]*v1.NodePool{}
	for i := range nodePools.Items {
		pools[nodePools.Items[i].Name] = &nodePools.Items[i]
	}
	if snap.Install, err = s.installChecks(ctx, nodePools.Items, nodePoolAccess); err != nil {
		return nil, err
	}

	templates := &v1.SandboxTemplateList{}
	if snap.TemplatesAccess, err = s.hub.list(ctx, kindTemplates, templates); err != nil {
		return nil, err
	}
	byName(templates.Items)
	for i := range templates.Items {
		row := newTemplateRow(&templates.Items[i], pools)
		snap.Templates = append(snap.Templates, row)
		if row.Ready.Ready {
			snap.ReadyTemplates = append(snap.ReadyTemplates, row.Name)
		}
	}

	gitSyncs := &v1.GitSyncList{}
	if snap.GitSyncsAccess, err = s.hub.list(ctx, kindGitSyncs, gitSyncs); err != nil {
		return nil, err
	}
	byName(gitSyncs.Items)
	for i := range gitSyncs.Items {
		snap.GitSyncs = append(snap.GitSyncs, newGitSyncRow(&gitSyncs.Items[i]))
	}
	return snap, nil
}

// byName orders a list read from the cache, which gives its objects in no
// fixed order: the page's tables keep theirs, and a render of an unchanged
// cluster is the same HTML, which an open page is then not sent again (in
// a different order every time, the tables of a cluster of twenty warm
// pools were sent anew at every re-render for time alone).
func byName[T any, P interface {
	*T
	GetName() string
}](items []T) {
	slices.SortFunc(items, func(a, b T) int { return strings.Compare(P(&a).GetName(), P(&b).GetName()) })
}

// installChecks is the installation's status: the CRDs and admission
// policies this binary expects, the reconciler, and the node pools.
func (s *Server) installChecks(ctx context.Context, nodePools []v1.NodePool, nodePoolAccess access) ([]check, error) {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	crdAccess, err := s.hub.list(ctx, kindCRDs, crds)
	if err != nil {
		return nil, err
	}
	checks := crdChecks(s.crds, crds.Items, crdAccess)
	for _, gvk := range admissionKinds {
		list := metadataList(gvk)
		a, err := s.hub.list(ctx, gvk.Kind, list)
		if err != nil {
			return nil, err
		}
		installed := map[string]bool{}
		for _, item := range list.Items {
			installed[item.Name] = true
		}
		checks = append(checks, policyChecks(s.policies, gvk.Kind, installed, a)...)
	}
	leases := &coordinationv1.LeaseList{}
	leaseAccess, err := s.hub.list(ctx, kindLease, leases)
	if err != nil {
		return nil, err
	}
	var lease *coordinationv1.Lease
	if len(leases.Items) > 0 {
		lease = &leases.Items[0]
	}
	checks = append(checks, leaseCheck(lease, leaseAccess, time.Now()))
	checks = append(checks, nodePoolChecks(nodePools, nodePoolAccess)...)
	return summarizeHidden(checks), nil
}

// section is a rendered part of the page.
type section struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// sections renders the parts of the page that follow the cluster, but the
// sandboxes.
func (s *Server) sections(snap *snapshot) ([]section, error) {
	out := make([]section, 0, len(sectionIDs))
	for _, id := range sectionIDs {
		html, err := s.render(id, snap)
		if err != nil {
			return nil, err
		}
		out = append(out, section{ID: id, HTML: html})
	}
	return out, nil
}

// render executes one of the page's templates on data.
func (s *Server) render(name string, data any) (string, error) {
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// page serves the whole page, showing the sandboxes its query asks for
// (sandboxView); a query it cannot read is refused, saying why.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	view, err := parseView(r.URL.Query())
	if err != nil {
		http.Error(w, "this page's query: "+err.Error(), http.StatusBadRequest)
		return
	}
	snap, err := s.snapshot(r.Context(), view, allParts)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	html, err := s.render("page", snap)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(html))
}

// templateFuncs are the helpers the templates use.
var templateFuncs = template.FuncMap{
	// datetime is the machine-readable form of a time; the page's script
	// shows it relative to now ("3m ago", "in 2h").
	"datetime": func(t any) string {
		switch t := t.(type) {
		case metav1.Time:
			return exact(t.Time)
		case *metav1.Time:
			if t == nil {
				return ""
			}
			return exact(t.Time)
		case *time.Time:
			if t == nil {
				return ""
			}
			return exact(*t)
		}
		return ""
	},
	"lower": strings.ToLower,
	"rowOf": func(row sandboxRow, terminal bool) rowData { return rowData{row, terminal} },
	// span is a duration as people write it ("15m", "2h"), not as Go
	// prints it ("15m0s").
	"span": func(d metav1.Duration) string { return duration.HumanDuration(d.Duration) },
}

// exact is a time as the datetime attribute of <time> takes it.
func exact(t time.Time) string { return t.UTC().Format(time.RFC3339) }
