package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

func TestMain(m *testing.M) {
	reconciletest.Main(m, func(mgr ctrl.Manager) error {
		return reconcile.SetupControllers(mgr, reconcile.Options{EgressGateway: testGateway})
	})
}

// testGateway is the egress gateway Service this package's controllers
// point sandboxes at; the tests that need it create it (egress_test.go).
var testGateway = types.NamespacedName{Namespace: v1.SystemNamespace, Name: "gateway-sandbox-test"}

func newTemplate(t *testing.T, c client.Client, mutate func(*v1.SandboxTemplate)) *v1.SandboxTemplate {
	t.Helper()
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("tpl")},
		Spec: v1.SandboxTemplateSpec{
			Image:   "ghcr.io/acme/python-sandbox:3.12",
			Command: []string{"sleep", "infinity"},
			Network: v1.Network{Egress: []v1.EgressRule{{CIDR: "0.0.0.0/0", Ports: []v1.NetworkPort{{Port: 443}}}}},
		},
	}
	if mutate != nil {
		mutate(tpl)
	}
	if err := c.Create(context.Background(), tpl); err != nil {
		t.Fatalf("create template: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), tpl) })
	return tpl
}

func newSandbox(t *testing.T, c client.Client, tpl *v1.SandboxTemplate, mutate func(*v1.Sandbox)) *v1.Sandbox {
	t.Helper()
	sbx := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("sbx")},
		Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}, Owner: "alice@example.com"},
	}
	if mutate != nil {
		mutate(sbx)
	}
	if err := c.Create(context.Background(), sbx); err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), sbx) })
	return sbx
}

// phaseOfReason is the phase a settled status shows with a Ready reason.
// Waiting for both matters: status fields and conditions are patched in two
// requests, so a reader can see one without the other for a moment.
var phaseOfReason = map[string]v1.SandboxPhase{
	v1.ReasonPodReady: v1.SandboxPhaseRunning,
	v1.ReasonStopped:  v1.SandboxPhaseStopped,
	v1.ReasonExpired:  v1.SandboxPhaseStopped,
}

// waitRelabelled waits until the member sbx claimed is relabelled as its
// own and controlled by it, which follows Ready once claims pause, and
// returns the namespace.
func waitRelabelled(t *testing.T, c client.Client, sbx *v1.Sandbox) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{}
	testcluster.Eventually(t, "member "+sbx.Status.Namespace+" relabelled for sandbox "+sbx.Name, func() (bool, string) {
		err := c.Get(context.Background(), types.NamespacedName{Name: sbx.Status.Namespace}, ns)
		return err == nil && ns.Labels[v1.LabelMember] == v1.MemberClaimed && metav1.IsControlledBy(ns, sbx),
			fmt.Sprintf("labels %v, owners %v, %v", ns.Labels, ns.OwnerReferences, err)
	})
	return ns
}

// waitCondition waits for the sandbox's Ready condition to have status,
// reason and a message containing every part (and for the matching phase),
// and returns the sandbox as last read.
func waitCondition(t *testing.T, c client.Client, sbx *v1.Sandbox, status metav1.ConditionStatus, reason string, parts ...string) *v1.Sandbox {
	t.Helper()
	got := &v1.Sandbox{}
	testcluster.Eventually(t, fmt.Sprintf("sandbox %s Ready=%s %s", sbx.Name, status, reason), func() (bool, string) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(sbx), got); err != nil {
			return false, err.Error()
		}
		cond := conditions.Get(got, v1.ReadyCondition)
		if cond == nil {
			return false, "no Ready condition"
		}
		phase, settles := phaseOfReason[reason]
		return cond.Status == status && (reason == "" || cond.Reason == reason) && containsAll(cond.Message, parts...) &&
				got.Status.ObservedGeneration == got.Generation && (!settles || got.Status.Phase == phase),
			fmt.Sprintf("%s %s: %s (phase %s)", cond.Status, cond.Reason, cond.Message, got.Status.Phase)
	})
	return got
}

// assertIsolated checks the isolation invariants every sandbox must have.
// Every test that starts a sandbox calls it.
func assertIsolated(t *testing.T, c client.Client, sbx *v1.Sandbox) {
	t.Helper()
	ctx := context.Background()
	nsName := sbx.Status.Namespace
	if nsName == "" {
		t.Fatalf("sandbox %s has no namespace in its status", sbx.Name)
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: nsName}, ns); err != nil {
		t.Fatalf("namespace: %v", err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s is not enforced restricted: %v", nsName, ns.Labels)
	}
	// A claimed member is relabelled for its sandbox after Ready.
	testcluster.Eventually(t, "namespace "+nsName+" naming its sandbox and owner, controlled by the sandbox", func() (bool, string) {
		if err := c.Get(ctx, types.NamespacedName{Name: nsName}, ns); err != nil {
			return false, err.Error()
		}
		ref := metav1.GetControllerOf(ns)
		return ns.Labels[v1.LabelSandbox] == sbx.Name && ns.Annotations[v1.AnnotationOwner] == sbx.Spec.Owner && ref != nil && ref.UID == sbx.UID,
			fmt.Sprintf("labels %v, annotations %v, owners %v", ns.Labels, ns.Annotations, ns.OwnerReferences)
	})

	np := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: nsName, Name: "sandbox"}, np); err != nil {
		t.Fatalf("network policy: %v", err)
	}
	if len(np.Spec.PodSelector.MatchLabels)+len(np.Spec.PodSelector.MatchExpressions) != 0 || len(np.Spec.PolicyTypes) != 2 {
		t.Errorf("network policy does not cover every pod in both directions: %+v", np.Spec)
	}
	for _, rule := range np.Spec.Egress {
		for _, peer := range rule.To {
			if peer.IPBlock != nil && peer.IPBlock.CIDR == "0.0.0.0/0" && !contains(peer.IPBlock.Except, "169.254.0.0/16") {
				t.Errorf("egress to 0.0.0.0/0 does not except the metadata range: %v", peer.IPBlock.Except)
			}
		}
	}

	quota := &corev1.ResourceQuota{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: nsName, Name: "sandbox"}, quota); err != nil {
		t.Fatalf("resource quota: %v", err)
	}
	if q := quota.Spec.Hard[corev1.ResourcePods]; q.String() != "2" {
		t.Errorf("quota allows %s pods, want 2 (the sandbox pod and its replacement)", q.String())
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: nsName, Name: "sandbox"}, &corev1.LimitRange{}); err != nil {
		t.Errorf("limit range: %v", err)
	}

	rb := &rbacv1.RoleBinding{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: nsName, Name: "sandbox-owner"}, rb); err != nil {
		t.Fatalf("role binding: %v", err)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Name != sbx.Spec.Owner || rb.RoleRef.Name != environment.OwnerClusterRole {
		t.Errorf("role binding grants %+v to %+v, want only the owner %s", rb.RoleRef, rb.Subjects, sbx.Spec.Owner)
	}

	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: nsName, Name: environment.PodName}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return // a stopped sandbox has no pod to check
		}
		t.Fatalf("pod: %v", err)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("pod mounts a service account token")
	}
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	for _, ctr := range pod.Spec.Containers {
		sc := ctr.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
			t.Errorf("container %s security context %+v", ctr.Name, sc)
		}
	}
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		t.Errorf("pod shares a host namespace")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasEvent(t *testing.T, c client.Client, sbx *v1.Sandbox, reason, text string) {
	t.Helper()
	testcluster.Eventually(t, "event "+reason+" for "+sbx.Name, func() (bool, string) {
		list := &corev1.EventList{}
		if err := c.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name == sbx.Name && e.InvolvedObject.Kind == "Sandbox" {
				seen = append(seen, e.Reason+": "+e.Message)
				if e.Reason == reason && strings.Contains(e.Message, text) {
					return true, ""
				}
			}
		}
		return false, strings.Join(seen, " | ")
	})
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
