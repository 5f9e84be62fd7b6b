package webui

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// pageSize is how many sandboxes a page shows: a cluster of 10,000 is
// paged on the server, so the page and each live update stay small.
const pageSize = 50

// sandboxView is which sandboxes the page shows, as its query says: whose,
// filtered by owner, template, phase and part of the name, in an order,
// one page of them. The page and its live stream read the same query.
type sandboxView struct {
	// Mine: the caller's own sandboxes only (the default; view=all shows
	// everyone's).
	Mine bool
	// Owner, Template and Phase match exactly; Name is a part of the name.
	// Template matches a sandbox of that template, directly or through its
	// warm pool.
	Owner, Template, Phase, Name string
	// Sort is one of sortOrders; "" is newest first.
	Sort string
	// Page counts from 1.
	Page int
}

// sortOrders are the orders the page offers, by their query value.
var sortOrders = map[string]func(a, b *v1.Sandbox) int{
	"newest": func(a, b *v1.Sandbox) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) },
	"oldest": func(a, b *v1.Sandbox) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) },
	"name":   func(a, b *v1.Sandbox) int { return strings.Compare(a.Name, b.Name) },
	"owner":  func(a, b *v1.Sandbox) int { return strings.Compare(a.Spec.Owner, b.Spec.Owner) },
	"phase":  func(a, b *v1.Sandbox) int { return strings.Compare(phaseOf(a), phaseOf(b)) },
}

// sortNames lists sortOrders for the page's choice and for errors.
var sortNames = []string{"newest", "oldest", "name", "owner", "phase"}

// phaseNames are the phases a filter may name: the API's, and Requested
// for a sandbox whose status is not written yet.
var phaseNames = append([]string{"Requested"}, phaseStrings()...)

func phaseStrings() []string {
	out := make([]string, 0, len(v1.SandboxPhases))
	for _, p := range v1.SandboxPhases {
		out = append(out, string(p))
	}
	return out
}

// phaseOf is the phase the page shows.
func phaseOf(s *v1.Sandbox) string {
	if s.Status.Phase == "" {
		return "Requested"
	}
	return string(s.Status.Phase)
}

// parseView reads the view from a query, refusing values it does not know
// with the values it would take.
func parseView(q url.Values) (sandboxView, error) {
	v := sandboxView{
		Mine: q.Get("view") != "all", Owner: q.Get("owner"), Template: q.Get("template"),
		Phase: q.Get("phase"), Name: strings.ToLower(q.Get("name")), Sort: q.Get("sort"), Page: 1,
	}
	if view := q.Get("view"); view != "" && view != "all" && view != "mine" {
		return v, fmt.Errorf("view=%q: want mine or all", view)
	}
	if v.Sort != "" && sortOrders[v.Sort] == nil {
		return v, fmt.Errorf("sort=%q: want one of %s", v.Sort, strings.Join(sortNames, ", "))
	}
	if v.Phase != "" && !slices.Contains(phaseNames, v.Phase) {
		return v, fmt.Errorf("phase=%q: want one of %s", v.Phase, strings.Join(phaseNames, ", "))
	}
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return v, fmt.Errorf("page=%q: want a page number from 1", p)
		}
		v.Page = n
	}
	return v, nil
}

// query is the view's query string on page, for links that keep it.
func (v sandboxView) query(page int) string {
	q := url.Values{}
	if !v.Mine {
		q.Set("view", "all")
	}
	for key, value := range map[string]string{"owner": v.Owner, "template": v.Template, "phase": v.Phase, "name": v.Name, "sort": v.Sort} {
		if value != "" {
			q.Set(key, value)
		}
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return "/"
	}
	return "/?" + q.Encode()
}

// sandboxPage is one page of the view, for the page's template.
type sandboxPage struct {
	View sandboxView
	Rows []sandboxRow
	// Matching is how many sandboxes the view's filter matches, Total how
	// many the caller may see (theirs, with Mine).
	Matching, Total int
	// First and Last number the page's rows among Matching, from 1.
	First, Last int
	// Prev and Next are links to the neighbouring pages, "" at an end.
	Prev, Next string
	// Phases and Sorts are the filter's choices.
	Phases, Sorts []string
}

// Filtered reports whether a filter narrows the view.
func (p sandboxPage) Filtered() bool {
	return p.View.Owner != "" || p.View.Template != "" || p.View.Phase != "" || p.View.Name != ""
}

// page picks the view's page from every sandbox the caller may see;
// templateOf names the template of each warm pool. Only the page's rows
// are built, so a render of 10,000 sandboxes costs a filter and a sort of
// pointers.
func (v sandboxView) page(items []v1.Sandbox, user string, templateOf map[string]string) sandboxPage {
	p := sandboxPage{View: v, Phases: phaseNames, Sorts: sortNames}
	matching := make([]*v1.Sandbox, 0, len(items))
	for i := range items {
		s := &items[i]
		if v.Mine && s.Spec.Owner != user {
			continue
		}
		p.Total++
		if v.matches(s, templateOf) {
			matching = append(matching, s)
		}
	}
	order := sortOrders[cmp.Or(v.Sort, "newest")]
	slices.SortFunc(matching, func(a, b *v1.Sandbox) int {
		return cmp.Or(order(a, b), strings.Compare(a.Name, b.Name))
	})
	p.Matching = len(matching)
	v.Page = max(v.Page, 1)
	start := min((v.Page-1)*pageSize, len(matching))
	end := min(start+pageSize, len(matching))
	for _, s := range matching[start:end] {
		p.Rows = append(p.Rows, newSandboxRow(s, user))
	}
	if end > start {
		p.First, p.Last = start+1, end
	}
	if v.Page > 1 {
		p.Prev = v.query(min(v.Page-1, max(1, (len(matching)+pageSize-1)/pageSize)))
	}
	if end < len(matching) {
		p.Next = v.query(v.Page + 1)
	}
	return p
}

// matches reports whether s passes the view's filter.
func (v sandboxView) matches(s *v1.Sandbox, templateOf map[string]string) bool {
	if v.Owner != "" && s.Spec.Owner != v.Owner || v.Phase != "" && phaseOf(s) != v.Phase {
		return false
	}
	if v.Name != "" && !strings.Contains(s.Name, v.Name) {
		return false
	}
	if v.Template == "" {
		return true
	}
	switch {
	case s.Spec.TemplateRef != nil:
		return s.Spec.TemplateRef.Name == v.Template
	case s.Spec.WarmPoolRef != nil:
		return templateOf[s.Spec.WarmPoolRef.Name] == v.Template
	}
	return false
}
