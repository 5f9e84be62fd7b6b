package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// pollInterval is how often waits read the object: a GET is cheap next to
// what is waited for, and a short interval keeps applies fast.
const pollInterval = 250 * time.Millisecond

// readiness tells whether an object is ready, and if not, what it is doing
// (for progress messages). An error means it will not become ready without
// a change of configuration.
type readiness func(obj *unstructured.Unstructured) (ready bool, progress string, err error)

// referenceGrace is how long a wait lets an object name another that does
// not exist (v1alpha1.MissingReference: a sandbox's template, say) before it
// fails the apply, rather than waiting out the timeout for what nothing may
// create: long enough for the same apply to create the other in parallel,
// when the configuration names it by a literal, not by an attribute that
// would order the two.
const referenceGrace = 30 * time.Second

// waitReady polls the object until ready says so, the object stalls, a
// reference stays missing for referenceGrace, or ctx ends. Progress goes to
// the log whenever it changes.
func (o objects) waitReady(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	start := time.Now()
	var live *unstructured.Unstructured
	var progress string
	var missingSince time.Time
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		var err error
		if live, err = o.get(ctx, name); err != nil {
			return false, err
		}
		ready, now, err := o.kind.ready(live)
		if err != nil {
			return false, fmt.Errorf("%s %q cannot become ready: %w", o.kind.noun, name, err)
		}
		switch status, reason, msg := condition(live, v1.ReadyCondition); {
		case ready || status != "False" || !observed(live) || !v1.MissingReference(reason):
			missingSince = time.Time{}
		case missingSince.IsZero():
			missingSince = time.Now()
		case time.Since(missingSince) >= referenceGrace:
			return false, fmt.Errorf("%s %q cannot become ready: %s (for %s; nothing created it)",
				o.kind.noun, name, msg, time.Since(missingSince).Round(time.Second))
		}
		if now != progress {
			progress = now
			logProgress(ctx, start, "waiting for "+o.kind.noun+" to be ready", name, progress)
		}
		return ready, nil
	})
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("%s %q was not ready after %s: %s; the object is applied, "+
			"raise the timeout or set wait_for_ready = false to not wait", o.kind.noun, name,
			time.Since(start).Round(time.Second), progress)
	}
	return live, err
}

func logProgress(ctx context.Context, start time.Time, msg, name, progress string) {
	tflog.Info(ctx, msg, map[string]any{"name": name, "progress": progress, "elapsed": time.Since(start).Round(time.Second).String()})
}

// observed reports whether the status describes the current generation;
// before that, its conditions are about an older spec.
func observed(obj *unstructured.Unstructured) bool {
	gen, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	return gen >= obj.GetGeneration()
}

// condition returns a status condition's status, reason and message.
func condition(obj *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return status, reason, message
		}
	}
	return "", "", ""
}

// readyCondition waits for Ready=True on the current generation and gives
// up on Stalled=True, which the controllers set for what only a change of
// declaration fixes.
func readyCondition(obj *unstructured.Unstructured) (bool, string, error) {
	if !observed(obj) {
		return false, "waiting for the reconciler to see this generation", nil
	}
	if status, _, msg := condition(obj, v1.StalledCondition); status == "True" {
		return false, msg, errors.New(msg)
	}
	status, _, msg := condition(obj, v1.ReadyCondition)
	if msg == "" {
		msg = "no Ready condition yet"
	}
	return status == "True", msg, nil
}

// warmPoolReady waits until every member is Ready.
func warmPoolReady(obj *unstructured.Unstructured) (bool, string, error) {
	if _, msg, err := readyCondition(obj); err != nil {
		return false, msg, err
	}
	if !observed(obj) {
		return false, "waiting for the reconciler to see this generation", nil
	}
	want, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	ready, _, _ := unstructured.NestedInt64(obj.Object, "status", "readyReplicas")
	have, _, _ := unstructured.NestedInt64(obj.Object, "status", "replicas")
	return ready == want && have == want, fmt.Sprintf("%d of %d members ready", ready, want), nil
}

// sandboxReady waits for Ready, or for the Stopped phase when the sandbox
// is declared stopped.
func sandboxReady(obj *unstructured.Unstructured) (bool, string, error) {
	state, _, _ := unstructured.NestedString(obj.Object, "spec", "state")
	if state != string(v1.SandboxStopped) {
		return readyCondition(obj)
	}
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	return observed(obj) && phase == string(v1.SandboxPhaseStopped), "phase " + phase, nil
}
