package webui

import (
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// installCommand installs or updates every part of Agent Sandbox from a
// checkout of the release (README, "Install on a cluster").
const installCommand = "kubectl apply --server-side -k config/"

// Health of an installation check.
const (
	healthOK      = "ok"
	healthBad     = "bad"
	healthUnknown = "unknown"
)

// check is one line of the installation status: a part, whether it is as
// this binary expects, and what to run when it is not.
type check struct {
	Part   string
	Health string
	Detail string
	Fix    string
	// When the detail happened (a lease renewed), shown relative to now
	// by the page, with WhenLabel before it.
	When      *time.Time
	WhenLabel string
}

// crdChecks compares the installed CRDs of this API with those this binary
// was built with. A CRD whose schema differs was installed from another
// release: objects would be validated, defaulted and pruned by rules the
// binary does not know.
func crdChecks(want []*apiextensionsv1.CustomResourceDefinition, have []apiextensionsv1.CustomResourceDefinition, seen access) []check {
	installed := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for i := range have {
		installed[have[i].Name] = &have[i]
	}
	if !seen.Watching {
		return []check{{Part: "CRDs", Health: healthUnknown, Detail: hiddenPrefix + seen.Err}}
	}
	var checks []check
	for _, crd := range want {
		c := check{Part: "CRD " + crd.Name}
		got, ok := installed[crd.Name]
		switch {
		case !ok:
			c.Health, c.Detail, c.Fix = healthBad, "not installed", installCommand
		default:
			c.Health, c.Detail = compareCRD(crd, got)
			if c.Health != healthOK {
				c.Fix = installCommand + " (from this release's checkout)"
			}
		}
		checks = append(checks, c)
	}
	return checks
}

func compareCRD(want, got *apiextensionsv1.CustomResourceDefinition) (string, string) {
	wantVersion := want.Spec.Versions[0]
	for _, v := range got.Spec.Versions {
		if v.Name != wantVersion.Name {
			continue
		}
		if !v.Served {
			return healthBad, fmt.Sprintf("installed, but %s is not served", v.Name)
		}
		if !equality.Semantic.DeepEqual(v.Schema, wantVersion.Schema) {
			return healthBad, fmt.Sprintf("installed, but its %s schema is not the one this binary was built with", v.Name)
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status != apiextensionsv1.ConditionTrue {
				return healthBad, "installed, not yet established: " + cond.Message
			}
		}
		return healthOK, fmt.Sprintf("installed, %s as this binary expects", v.Name)
	}
	return healthBad, fmt.Sprintf("installed without version %s, which this binary speaks", wantVersion.Name)
}

// policyChecks reports whether each object of config/admission of one kind
// is installed: without the policies, anyone may take over a sandbox.
func policyChecks(want []*unstructured.Unstructured, kindOf string, installed map[string]bool, seen access) []check {
	if !seen.Watching && !seen.Missing {
		return []check{{Part: plural(kindOf), Health: healthUnknown, Detail: hiddenPrefix + seen.Err}}
	}
	var checks []check
	for _, obj := range want {
		if obj.GetKind() != kindOf {
			continue
		}
		c := check{Part: kindOf + " " + obj.GetName()}
		switch {
		case seen.Missing:
			c.Health, c.Detail = healthBad, "this API server does not serve "+plural(kindOf)+" (Kubernetes 1.34 or later has them)"
		case !installed[obj.GetName()]:
			c.Health, c.Detail, c.Fix = healthBad, "not installed: sandboxes are not limited to their owners", installCommand
		default:
			c.Health, c.Detail = healthOK, "installed"
		}
		checks = append(checks, c)
	}
	return checks
}

// leaseCheck says whether a reconciler is running: one holds the Lease and
// renewed it within its duration.
func leaseCheck(lease *coordinationv1.Lease, seen access, now time.Time) check {
	c := check{Part: "Reconciler"}
	logs := fmt.Sprintf("kubectl -n %s logs deploy/agentsandbox-reconciler", v1.SystemNamespace)
	switch {
	case !seen.Watching:
		c.Health, c.Detail = healthUnknown, hiddenPrefix+seen.Err
		return c
	case lease == nil:
		c.Health, c.Detail, c.Fix = healthBad, fmt.Sprintf("no reconciler has run: there is no Lease %s/%s", v1.SystemNamespace, v1.ReconcilerLease), installCommand
		return c
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	var renewed time.Time
	if lease.Spec.RenewTime != nil {
		renewed = lease.Spec.RenewTime.Time
	}
	c.When = &renewed
	if holder == "" {
		c.Health, c.Detail, c.Fix, c.WhenLabel = healthBad, "stopped: the last reconciler released the lead and none took it", logs, "released"
		return c
	}
	valid := 15 * time.Second
	if lease.Spec.LeaseDurationSeconds != nil {
		valid = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	if now.Sub(renewed) > valid {
		c.Health, c.Detail, c.Fix, c.WhenLabel = healthBad, fmt.Sprintf("not renewing: %s held the lead, which lapses %s after a renewal", holder, valid), logs, "last renewed"
		return c
	}
	c.Health, c.Detail, c.WhenLabel = healthOK, fmt.Sprintf("running: %s holds the lead", holder), "last renewed"
	return c
}

// nodePoolCheck reports a node pool: its RuntimeClass, how many nodes it
// matches, and why it is not Ready.
func nodePoolCheck(pool *v1.NodePool) check {
	c := check{Part: "Node pool " + pool.Name}
	runtimeClass := pool.Status.RuntimeClassName
	if runtimeClass == "" {
		runtimeClass = "(none yet)"
	}
	c.Detail = fmt.Sprintf("RuntimeClass %s, handler %s: %d nodes match, %d ready", runtimeClass, pool.Spec.RuntimeHandler,
		pool.Status.Nodes, pool.Status.ReadyNodes)
	r := pool.Readiness()
	c.Health = healthOK
	if !r.Ready {
		c.Health = healthBad
		c.Detail += "; not ready: " + r.Message
	}
	return c
}

// plural is the plural of a kind's name: Policies, Bindings.
func plural(kind string) string {
	if base, ok := strings.CutSuffix(kind, "y"); ok {
		return base + "ies"
	}
	return kind + "s"
}

// nodePoolChecks reports every node pool, or that there is none.
func nodePoolChecks(pools []v1.NodePool, seen access) []check {
	switch {
	case !seen.Watching:
		return []check{{Part: "Node pools", Health: healthUnknown, Detail: hiddenPrefix + seen.Err}}
	case len(pools) == 0:
		return []check{{Part: "Node pools", Health: healthOK, Detail: "none: sandboxes run on the cluster's default runtime"}}
	}
	checks := make([]check, 0, len(pools))
	for i := range pools {
		checks = append(checks, nodePoolCheck(&pools[i]))
	}
	return checks
}

// hiddenPrefix starts the detail of a check the caller may not read.
const hiddenPrefix = "hidden from you: "

// summarizeHidden folds the checks the caller may not read into one line,
// where the first of them was: a developer who is not a cluster admin
// would otherwise read a row of the API server's refusals for every part.
// A single hidden check stays as it is, with the API server's words.
func summarizeHidden(checks []check) []check {
	var hidden []string
	first := -1
	for i, c := range checks {
		if c.Health == healthUnknown && strings.HasPrefix(c.Detail, hiddenPrefix) {
			hidden = append(hidden, c.Part)
			if first < 0 {
				first = i
			}
		}
	}
	if len(hidden) < 2 {
		return checks
	}
	out := make([]check, 0, len(checks)-len(hidden)+1)
	for i, c := range checks {
		switch {
		case i == first:
			out = append(out, check{Part: "Installation", Health: healthUnknown,
				Detail: "visible to cluster admins: you may not read " + strings.Join(hidden, ", ")})
		case c.Health == healthUnknown && strings.HasPrefix(c.Detail, hiddenPrefix):
		default:
			out = append(out, c)
		}
	}
	return out
}
