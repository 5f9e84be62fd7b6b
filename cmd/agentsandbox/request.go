package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// syncNow is `sync --gitsync NAME`: it requests a sync of the GitSync and
// prints the revision applied, or returns why the sync failed.
func syncNow(cmd *cobra.Command, conn clientFlags, name string, timeout time.Duration) error {
	c, err := conn.kubeClient()
	if err != nil {
		return err
	}
	gs, err := requestSync(cmd.Context(), c, name, timeout, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	ready := conditions.Get(gs, v1.ReadyCondition)
	switch {
	case ready == nil:
		return fmt.Errorf("GitSync %s: no Ready condition after the sync", name)
	case ready.Status != metav1.ConditionTrue:
		return fmt.Errorf("GitSync %s: %s: %s", name, ready.Reason, ready.Message)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "GitSync %s: %s\n", name, ready.Message)
	return err
}

// stillWaitingEvery is how often a wait with nothing new to report says
// that it goes on.
const stillWaitingEvery = 15 * time.Second

// requestSync asks the GitSync name on the cluster for a sync now, by a new
// value of the reconcile-requested-at annotation, and waits until the
// controller has finished that sync: what a pipeline runs after pushing to
// the repository, as `flux reconcile` is for Flux. Progress goes to
// progress; the GitSync is returned as the sync left it.
func requestSync(ctx context.Context, c client.Client, name string, timeout time.Duration, progress io.Writer) (*v1.GitSync, error) {
	gs, err := readGitSync(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if gs.Spec.Suspend {
		return nil, fmt.Errorf("GitSync %s is suspended (spec.suspend: true): it syncs nothing until resumed", name)
	}
	token := time.Now().UTC().Format(time.RFC3339Nano)
	patch := client.MergeFrom(gs.DeepCopy())
	if gs.Annotations == nil {
		gs.Annotations = map[string]string{}
	}
	gs.Annotations[v1.AnnotationReconcileRequestedAt] = token
	if err := c.Patch(ctx, gs, patch); err != nil {
		return nil, fmt.Errorf("failed to request a sync of GitSync %s: %w", name, err)
	}
	start, lastSaid := time.Now(), time.Now()
	say := func(what string) {
		lastSaid = time.Now()
		_, _ = fmt.Fprintf(progress, "GitSync %s: %s [%s]\n", name, what, time.Since(start).Round(100*time.Millisecond))
	}
	say("sync requested")
	said := ""
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, gs); err != nil {
			if apierrors.IsNotFound(err) {
				return false, fmt.Errorf("GitSync %s was deleted while it synced", name)
			}
			return false, nil // a passing API hiccup; the timeout bounds the wait
		}
		if r := conditions.Get(gs, v1.ReconcilingCondition); r != nil && r.Message != said {
			said = r.Message
			say(said)
		} else if time.Since(lastSaid) >= stillWaitingEvery {
			// A sync of thousands of objects takes minutes: say that the
			// wait goes on.
			say("still waiting: " + cmp.Or(said, "sync requested"))
		}
		return gs.Status.LastHandledReconcileAt == token && gs.Status.ObservedGeneration == gs.Generation &&
			!conditions.Has(gs, v1.ReconcilingCondition), nil
	})
	if wait.Interrupted(err) {
		return nil, fmt.Errorf("GitSync %s did not finish the requested sync within %s (is the reconciler running? kubectl describe gitsync %s)", name, timeout, name)
	}
	return gs, err
}
