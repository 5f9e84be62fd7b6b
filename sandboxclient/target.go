package sandboxclient

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// target is the running pod of a sandbox, where exec, files, logs and
// port-forwarding go.
type target struct {
	sandbox   *v1.Sandbox
	namespace string
	pod       string
	container string
	// running is the pod as read.
	running *corev1.Pod
	// workspace is the workspace's mount path in the container.
	workspace string
}

// resolve finds the sandbox's running pod, waking the sandbox first when it
// stopped for idleness (see Client.Waking). It reads the sandbox and then the
// pod as the caller, so that a missing sandbox, a stopped one and someone
// else's each give their own clear error before any stream is opened (the
// owner's RoleBinding grants pod reads together with exec and
// port-forward).
func (c *Client) resolve(ctx context.Context, name, action string) (*target, error) {
	return c.resolveWaking(ctx, name, action, true)
}

// resolveRunning is resolve for what only looks at a running sandbox (its
// logs, its pod): it counts as a use, but does not wake one stopped for
// idleness, whose logs went with its pod.
func (c *Client) resolveRunning(ctx context.Context, name, action string) (*target, error) {
	return c.resolveWaking(ctx, name, action, false)
}

func (c *Client) resolveWaking(ctx context.Context, name, action string, wake bool) (*target, error) {
	sbx, err := c.getRaw(ctx, name)
	if err != nil {
		return nil, c.explain(ctx, name, action, err)
	}
	c.observe(sbx)
	if wake && sbx.IdleStopped() && sbx.Spec.State == v1.SandboxRunning {
		if sbx, err = c.wake(ctx, sbx); err != nil {
			return nil, err
		}
	}
	c.used(name)
	notReady := &NotReadyError{Name: name, Phase: sbx.Status.Phase, Message: conditions.GetMessage(sbx, v1.ReadyCondition)}
	if sbx.Status.Phase != v1.SandboxPhaseRunning || sbx.Status.PodName == "" || sbx.Status.Namespace == "" {
		return nil, notReady
	}
	pod, err := c.kube.CoreV1().Pods(sbx.Status.Namespace).Get(ctx, sbx.Status.PodName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, notReady
	}
	if err != nil {
		return nil, c.explain(ctx, name, action, err)
	}
	if pod.Status.Phase != corev1.PodRunning || len(pod.Spec.Containers) == 0 {
		notReady.Message = fmt.Sprintf("pod %s is %s", pod.Name, pod.Status.Phase)
		return nil, notReady
	}
	// The sandbox pod has one container, the sandbox itself.
	ctr := pod.Spec.Containers[0]
	t := &target{sandbox: sbx, namespace: pod.Namespace, pod: pod.Name, container: ctr.Name, running: pod}
	for _, m := range ctr.VolumeMounts {
		if m.Name == v1.WorkspaceName {
			t.workspace = m.MountPath
		}
	}
	return t, nil
}

// Workspace returns the mount path of the sandbox's workspace in its
// container, where the file operations' relative paths start ("" when the
// sandbox has none). Like every operation on a running sandbox, it fails
// with a clear error when the sandbox is missing, not running or not the
// caller's, so it also checks that a session can begin.
func (c *Client) Workspace(ctx context.Context, name string) (string, error) {
	t, err := c.resolve(ctx, name, "connect to")
	if err != nil {
		return "", err
	}
	return t.workspace, nil
}

// Pod returns the sandbox's running pod, read as the caller: where it runs
// (status.hostIP), and how its containers started.
func (c *Client) Pod(ctx context.Context, name string) (*corev1.Pod, error) {
	t, err := c.resolveRunning(ctx, name, "read the pod of")
	if err != nil {
		return nil, err
	}
	return t.running, nil
}
