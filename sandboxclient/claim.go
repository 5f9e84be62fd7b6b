package sandboxclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// ClaimOptions ask for a sandbox: set exactly one of Pool and Template.
type ClaimOptions struct {
	// Pool claims a Ready member of this WarmPool (the pool cold-starts one
	// from its template when none is Ready, unless it is set to wait).
	Pool string
	// Template starts a sandbox from this SandboxTemplate.
	Template string
	// Name of the sandbox; empty generates one from the pool or template.
	Name string
	// TTL ends the sandbox's lifetime this long after creation (0: the
	// template's lifecycle applies).
	TTL time.Duration
	// Wait, when positive, waits up to this long for the sandbox to be Ready.
	Wait time.Duration
	// Progress, when set, hears every change while waiting.
	Progress func(Progress)
}

// Progress is a step of a sandbox on its way to a state.
type Progress struct {
	// Name of the sandbox.
	Name    string
	Phase   v1.SandboxPhase
	Reason  string
	Message string
	// LaunchType and LaunchMessage say whether a pool claim came warm or
	// was cold-started, and why.
	LaunchType    v1.LaunchType
	LaunchMessage string
	Elapsed       time.Duration
}

// Claim creates a sandbox for the caller (admission makes the caller its
// owner) and, with opts.Wait, waits for it to be Ready. When the wait fails
// the sandbox is returned with the error, so the caller can delete it.
func (c *Client) Claim(ctx context.Context, opts ClaimOptions) (*v1.Sandbox, error) {
	if (opts.Pool == "") == (opts.Template == "") {
		return nil, errors.New("claim from exactly one of a pool and a template")
	}
	// The controller would wait for a missing pool or template to appear;
	// someone claiming one wants to hear at once that it is not there.
	sbx := &v1.Sandbox{}
	var source client.Object = &v1.SandboxTemplate{}
	kind, sourceName := "template", opts.Template
	if opts.Pool != "" {
		source, kind, sourceName = &v1.WarmPool{}, "warm pool", opts.Pool
		sbx.Spec.WarmPoolRef = &v1.LocalObjectReference{Name: opts.Pool}
	} else {
		sbx.Spec.TemplateRef = &v1.LocalObjectReference{Name: opts.Template}
	}
	if err := c.client.Get(ctx, client.ObjectKey{Name: sourceName}, source); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &ClaimRefusedError{Missing: true, message: fmt.Sprintf("%s %s not found", kind, sourceName)}
		}
		return nil, fmt.Errorf("reading %s %s: %w", kind, sourceName, err)
	}
	if opts.Name != "" {
		sbx.Name = opts.Name
	} else {
		sbx.GenerateName = generateNamePrefix(opts.Pool + opts.Template)
	}
	if opts.TTL > 0 {
		sbx.Spec.TTL = &metav1.Duration{Duration: opts.TTL}
	}
	if err := c.client.Create(ctx, sbx); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, &ClaimRefusedError{Taken: true, message: fmt.Sprintf("sandbox %s already exists", opts.Name)}
		}
		return nil, c.explain(ctx, "", "create", err)
	}
	if opts.Wait <= 0 {
		return sbx, nil
	}
	ready, err := c.WaitReady(ctx, sbx.Name, opts.Wait, opts.Progress)
	if err != nil {
		return sbx, err
	}
	return ready, nil
}

// generateNamePrefix keeps generated names within the characters a
// sandbox name may have (the API server appends five).
func generateNamePrefix(from string) string {
	const maxPrefix = v1.MaxSandboxNameLength - 5 - 1
	if len(from) > maxPrefix {
		from = from[:maxPrefix]
	}
	return from + "-"
}

// WaitReady waits up to timeout for the sandbox to be Ready. It fails early
// when the sandbox fails, is stalled (only a spec change can help) or stops,
// and when its pod has found no node, or its node has failed to start it,
// for v1.NotTransient (reasons Unschedulable and PodNotStarting): the
// controller's message then gives the scheduler's or the kubelet's words.
func (c *Client) WaitReady(ctx context.Context, name string, timeout time.Duration, progress func(Progress)) (*v1.Sandbox, error) {
	return c.waitFor(ctx, name, timeout, progress, func(sbx *v1.Sandbox) (bool, error) {
		if sbx.Usable() {
			return true, nil
		}
		if sbx.Status.ObservedGeneration != sbx.Generation {
			return false, nil
		}
		switch {
		case sbx.Readiness().Failed:
			return false, fmt.Errorf("sandbox %s cannot start: %s", name, sbx.Readiness().Message)
		case sbx.Spec.State == v1.SandboxStopped:
			return false, &NotReadyError{Name: name, Phase: sbx.Status.Phase, Message: "its state is Stopped"}
		}
		return false, nil
	})
}

// WaitStopped waits up to timeout for a stopped sandbox's pod to be gone.
// It fails early when the pod's node has not finished tearing it down for
// v1.TerminationStuckAfter (reason TerminationStuck, with the kubelet's
// words).
func (c *Client) WaitStopped(ctx context.Context, name string, timeout time.Duration, progress func(Progress)) (*v1.Sandbox, error) {
	return c.waitFor(ctx, name, timeout, progress, func(sbx *v1.Sandbox) (bool, error) {
		if sbx.Status.ObservedGeneration != sbx.Generation {
			return false, nil
		}
		if conditions.GetReason(sbx, v1.ReadyCondition) == v1.ReasonTerminationStuck {
			return false, fmt.Errorf("sandbox %s cannot stop: %s", name, conditions.GetMessage(sbx, v1.ReadyCondition))
		}
		return sbx.Status.Phase == v1.SandboxPhaseStopped, nil
	})
}

// waitFor watches one sandbox until done says so, reporting each change of
// phase or Ready condition to progress.
func (c *Client) waitFor(ctx context.Context, name string, timeout time.Duration, progress func(Progress), done func(*v1.Sandbox) (bool, error)) (*v1.Sandbox, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last Progress
	var sbx *v1.Sandbox
	check := func(s *v1.Sandbox) (bool, error) {
		sbx = s
		cond := conditions.Get(s, v1.ReadyCondition)
		p := Progress{Name: s.Name, Phase: s.Status.Phase, LaunchType: s.Status.LaunchType, LaunchMessage: s.Status.LaunchMessage}
		if cond != nil {
			p.Reason, p.Message = cond.Reason, cond.Message
		}
		p.Elapsed = last.Elapsed
		if progress != nil && p != last {
			p.Elapsed = time.Since(start)
			progress(p)
		}
		last = p
		return done(s)
	}
	for {
		// Get, then watch from its resourceVersion: nothing is missed between
		// the two, and a closed watch simply starts over.
		s, err := c.getRaw(ctx, name)
		if err != nil {
			return sbx, c.waitError(ctx, name, timeout, sbx, err)
		}
		if ok, err := check(s); ok || err != nil {
			return sbx, err
		}
		w, err := c.client.Watch(ctx, &v1.SandboxList{}, &client.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw:           &metav1.ListOptions{ResourceVersion: s.ResourceVersion},
		})
		if err != nil {
			return sbx, c.waitError(ctx, name, timeout, sbx, err)
		}
		ok, err := drain(w, name, check)
		w.Stop()
		if ok || err != nil {
			return sbx, err
		}
		if ctx.Err() != nil {
			return sbx, c.waitError(ctx, name, timeout, sbx, ctx.Err())
		}
	}
}

// drain feeds the watch's events to check until it decides or the watch ends.
func drain(w watch.Interface, name string, check func(*v1.Sandbox) (bool, error)) (bool, error) {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Deleted:
			return false, &NotFoundError{Name: name}
		case watch.Added, watch.Modified:
			if s, ok := ev.Object.(*v1.Sandbox); ok {
				if ok, err := check(s); ok || err != nil {
					return ok, err
				}
			}
		}
	}
	return false, nil
}

// waitError says what the sandbox was doing when the wait ended.
func (c *Client) waitError(ctx context.Context, name string, timeout time.Duration, last *v1.Sandbox, err error) error {
	if ctx.Err() == nil || last == nil {
		return c.explain(ctx, name, "watch", err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("sandbox %s not ready after %s (phase %s): %s: %w", name, timeout,
			last.Status.Phase, conditions.GetMessage(last, v1.ReadyCondition), context.DeadlineExceeded)
	}
	return ctx.Err()
}
