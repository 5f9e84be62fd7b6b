package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// pollInterval is how often waits read the object: a GET is cheap next to
// what is waited for, and a short interval keeps applies fast.
const pollInterval = 250 * time.Millisecond

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
		readiness, err := readinessOf(live)
		if err != nil {
			return false, err
		}
		if readiness.Failed {
			return false, fmt.Errorf("%s %q cannot become ready: %s", o.kind.Noun, name, readiness.Message)
		}
		ready, now := readiness.Ready, readiness.Message
		if now == "" {
			now = "not ready yet"
		}
		switch status, reason, msg := condition(live, v1.ReadyCondition); {
		case ready || status != "False" || !observed(live) || !v1.MissingReference(reason):
			missingSince = time.Time{}
		case missingSince.IsZero():
			missingSince = time.Now()
		case time.Since(missingSince) >= referenceGrace:
			return false, fmt.Errorf("%s %q cannot become ready: %s (for %s; nothing created it)",
				o.kind.Noun, name, msg, time.Since(missingSince).Round(time.Second))
		}
		if now != progress {
			progress = now
			logProgress(ctx, start, "waiting for "+o.kind.Noun+" to be ready", name, progress)
		}
		return ready, nil
	})
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("%s %q was not ready after %s: %s; the object is applied, "+
			"raise the timeout or set wait_for_ready = false to not wait", o.kind.Noun, name,
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

// readinessOf judges a live object by the API's one definition of ready
// (v1alpha1.Readiness), which the GitOps health check and the CLI share.
func readinessOf(live *unstructured.Unstructured) (v1.Readiness, error) {
	obj, err := kubescheme.Scheme.New(live.GroupVersionKind())
	if err != nil {
		return v1.Readiness{}, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, obj); err != nil {
		return v1.Readiness{}, fmt.Errorf("reading %s %s: %w", live.GetKind(), live.GetName(), err)
	}
	judged, ok := obj.(v1.Judged)
	if !ok {
		return v1.Readiness{}, fmt.Errorf("%s has no readiness", live.GetKind())
	}
	return judged.Readiness(), nil
}
