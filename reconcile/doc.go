// Package reconcile holds the controllers of the five agentsandbox.dev kinds
// and the controller-runtime manager that runs them.
//
// # One shape for every controller
//
// The five controllers (nodepool, template, sandbox, warmpool, gitsync)
// are written alike, so that reading one teaches the others and a change
// to how status is written is made once:
//
//   - Reconcile reads the object. Not found, it forgets what the
//     controller remembers of it; being deleted, it finalizes and returns.
//   - A finalizer, where the kind has one, is set with
//     statuspatch.SetFinalizer before the work it guards.
//   - One pass does the work and returns an outcome: what it found and
//     did, the problem that stops it (reconcile/problem), and an error for
//     what a retry may mend. The pass writes no status. (One exception:
//     a sandbox's placement records how it was launched as it claims a
//     member, the claim and its record being one decision.)
//   - A setStatus(object, outcome) turns the outcome into the status and
//     its kstatus conditions. It calls no API and reads no clock it is not
//     given, so a table test covers it without a cluster.
//   - Events and metrics of a transition are recorded from the status
//     before and after, apart from setStatus.
//   - The status is written once, at the end, through statuspatch: one
//     merge patch, none when nothing changed (its package comment gives
//     the write budget behind that). A long pass may write progress first
//     (Reconciling) through the same Patcher.
//   - When to look again is one decision taken from the outcome: an error
//     goes to the workqueue's backoff, never with a Result beside it; a
//     stalled problem waits for a watched change (reconcile.TerminalError);
//     a wait is a RequeueAfter.
//   - What a controller remembers from one pass to the next is one memory
//     type in its package (memory.go), whose comment says why losing it on
//     a restart is harmless.
//
// The controllers are configured through Options, passed to
// SetupControllers; none reads flags or the environment itself.
package reconcile
