package webui

import (
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// The rows the page shows, made from the cached objects by pure functions so
// that what a column says is decided (and tested) apart from the HTML.

// templateRow is a line of the Templates table.
type templateRow struct {
	Name, Image, Runtime, Workspace, Egress string
	Ready                                   v1.Readiness
}

func newTemplateRow(t *v1.SandboxTemplate, pools map[string]*v1.NodePool) templateRow {
	row := templateRow{Name: t.Name, Image: t.Spec.Image, Ready: t.Readiness(),
		Runtime: "cluster default", Workspace: workspaceSummary(t.Spec.Workspace), Egress: egressSummary(t.Spec.Network)}
	if ref := t.Spec.NodePoolRef; ref != nil {
		row.Runtime = "node pool " + ref.Name
		if pool := pools[ref.Name]; pool != nil {
			row.Runtime += " (" + pool.Spec.RuntimeHandler + ")"
		}
	}
	return row
}

func workspaceSummary(w v1.Workspace) string {
	if !w.Persistent {
		return "ephemeral (lost on stop)"
	}
	size := w.SizeOrDefault()
	return "persistent, " + size.String()
}

// egressSummary says where a sandbox may connect: nowhere (or the cluster
// resolver only) unless the template allows more; hosts through the egress gateway, Services by
// namespace/name, endpoints with the credential the gateway adds.
func egressSummary(n v1.Network) string {
	if len(n.Egress) == 0 && len(n.Endpoints) == 0 {
		if n.AllowsClusterDNS() {
			return "DNS only"
		}
		return "none"
	}
	rules := make([]string, 0, len(n.Egress)+len(n.Endpoints))
	for _, r := range n.Egress {
		var rule string
		switch {
		case len(r.Hosts) > 0:
			rule = strings.Join(r.Hosts, ", ")
		case r.Service != nil:
			rule = "service " + r.Service.Namespace + "/" + r.Service.Name
		default:
			rule = r.CIDR
		}
		if len(r.Except) > 0 {
			rule += " except " + strings.Join(r.Except, ", ")
		}
		var ports []string
		for _, p := range r.Ports {
			port := fmt.Sprint(p.Port)
			if p.EndPort != nil {
				port += fmt.Sprintf("-%d", *p.EndPort)
			}
			ports = append(ports, port)
		}
		if len(ports) > 0 {
			rule += " port " + strings.Join(ports, ",")
		}
		rules = append(rules, rule)
	}
	for _, e := range n.Endpoints {
		endpoint := "endpoint " + e.Name + " → " + e.URL
		if e.Credential != nil {
			endpoint += " (key brokered)"
		}
		rules = append(rules, endpoint)
	}
	return strings.Join(rules, "; ")
}

// warmPoolRow is a line of the Warm pools table.
type warmPoolRow struct {
	Name, Template, Rollout string
	ReadyMembers, Replicas  int32
	Ready                   v1.Readiness
}

func newWarmPoolRow(p *v1.WarmPool) warmPoolRow {
	row := warmPoolRow{Name: p.Name, Template: p.Spec.TemplateRef.Name, ReadyMembers: p.Status.ReadyReplicas,
		Replicas: p.DesiredReplicas(), Ready: p.Readiness(), Rollout: "up to date"}
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
		row.Rollout = c.Message
	}
	return row
}

// gitSyncRow is a line of the Git syncs table.
type gitSyncRow struct {
	Name, URL, Revision string
	Ready               v1.Readiness
	// Since is when Ready last changed: the last sync that changed
	// anything, or the first that failed.
	Since *metav1.Time
}

func newGitSyncRow(g *v1.GitSync) gitSyncRow {
	row := gitSyncRow{Name: g.Name, URL: g.Spec.URL, Revision: g.Status.LastAppliedRevision, Ready: g.Readiness()}
	if row.Revision == "" {
		row.Revision = "none applied"
	}
	if c := apimeta.FindStatusCondition(g.Status.Conditions, v1.ReadyCondition); c != nil {
		row.Since = &c.LastTransitionTime
	}
	return row
}

// sandboxRow is a line of the Sandboxes table.
type sandboxRow struct {
	Name, Owner, From, State, Phase, Launch string
	Ready                                   v1.Readiness
	Created                                 metav1.Time
	Expires                                 *metav1.Time
	// Idle is the idle stop that applies (nil without an idle timeout),
	// LastUsed the last use the reconciler knows of; IdleStopped says it
	// stopped for idleness.
	Idle        *v1.IdleStatus
	LastUsed    *metav1.Time
	IdleStopped bool
	// Mine: the caller owns it, so exec, SSH and the terminal are theirs.
	Mine bool
}

func newSandboxRow(s *v1.Sandbox, user string) sandboxRow {
	row := sandboxRow{Name: s.Name, Owner: s.Spec.Owner, State: string(s.Spec.State), Phase: string(s.Status.Phase),
		Launch: string(s.Status.LaunchType), Ready: s.Readiness(), Created: s.CreationTimestamp,
		Expires: s.Status.ShutdownAt, Idle: s.Status.Idle, LastUsed: s.Status.LastActivityAt, IdleStopped: s.IdleStopped(), Mine: user != "" && s.Spec.Owner == user}
	switch {
	case s.Spec.WarmPoolRef != nil:
		row.From = "pool " + s.Spec.WarmPoolRef.Name
	case s.Spec.TemplateRef != nil:
		row.From = "template " + s.Spec.TemplateRef.Name
	}
	if row.Phase == "" {
		row.Phase = "Requested" // no status written yet
	}
	if row.State == "" {
		row.State = string(v1.SandboxRunning)
	}
	return row
}

// rowData is what a sandbox's row is rendered from: the row, and whether
// the page offers terminals.
type rowData struct {
	sandboxRow
	Terminal bool
}
