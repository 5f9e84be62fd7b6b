package testcluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestRBACIsEnforced impersonates a user with no bindings: the cluster must
// refuse it, or every later least-privilege test would prove nothing.
func TestRBACIsEnforced(t *testing.T) {
	cluster := testcluster.Get(t)
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory@example.com"}
	c, err := client.New(cfg, client.Options{Scheme: kubescheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	err = c.List(context.Background(), &v1.SandboxList{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("an unbound user listing sandboxes got %v, want Forbidden", err)
	}
}

// TestPodsRunOnBothNodeGroups schedules a pod onto each kwok node group and
// waits for kwok to report it Running and Ready.
func TestPodsRunOnBothNodeGroups(t *testing.T) {
	cluster := testcluster.Get(t)
	if !cluster.Local {
		t.Skip("the node groups are those of the local cluster")
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("nodes")}}
	if err := cluster.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx, ns) })
	for _, group := range []string{"general", "gvisor"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: group},
			Spec: corev1.PodSpec{
				NodeSelector:                 map[string]string{"agentsandbox.dev/node-group": group},
				AutomountServiceAccountToken: ptr.To(false),
				Containers:                   []corev1.Container{{Name: "main", Image: "busybox"}},
			},
		}
		if err := cluster.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return false, err
			}
			return pod.Status.Phase == corev1.PodRunning && podReady(pod) && pod.Status.PodIP != "", nil
		})
		if err != nil {
			t.Fatalf("pod on the %s group: phase %s, node %q: %v", group, pod.Status.Phase, pod.Spec.NodeName, err)
		}
		if !strings.HasPrefix(pod.Spec.NodeName, group+"-") {
			t.Errorf("pod for the %s group ran on %s", group, pod.Spec.NodeName)
		}
	}
}

// TestAuditLogRecordsSandboxRequests writes an agentsandbox.dev object and
// finds the request, with its user, in the local cluster's audit log.
func TestAuditLogRecordsSandboxRequests(t *testing.T) {
	cluster := testcluster.Get(t)
	if !cluster.Local {
		t.Skip("the audit log is a file of the local cluster")
	}
	ctx := context.Background()
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("audited")},
		Spec:       v1.SandboxTemplateSpec{Image: "python:3.12"},
	}
	if err := cluster.Client.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx, tpl) })
	logPath := cluster.AuditLog
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"verb":"create"`) && strings.Contains(line, `"name":"`+tpl.Name+`"`) &&
				strings.Contains(line, `"username":"kwok-admin"`) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no audit event for creating %s in %s: %v", tpl.Name, logPath, err)
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
