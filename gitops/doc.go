// Package gitops is the GitOps half of agentsandbox: a GitSync (and
// `agentsandbox sync --once`) reads declarations from Git (declarations),
// fetches revisions (source), and validates, applies and prunes them
// (applier). Sync is the one pipeline of those steps, which the controller
// (reconcile/gitsync), `sync --once` and `diff` (Preview) all run.
//
// # Nothing lost, nothing left behind
//
// A sync reads the whole revision and dry-runs every object before it writes
// anything, so a revision that does not read, validate or pass its
// reference checks applies and prunes nothing, and the cluster keeps the
// last applied revision.
//
// The inventory (status.inventory) is what makes pruning possible: an
// object a GitSync created and its Git history no longer declares is found
// only through it. So the inventory must never miss an object that exists,
// whatever point a sync is stopped at (SIGKILL, a lost node, an API server
// going away). The writes happen in this order:
//
//  1. Before applying, when the revision declares objects the inventory does
//     not list, the inventory is patched to the union of what it lists and
//     what the revision declares. Nothing is applied unless that write
//     succeeded.
//  2. The objects are applied (created or updated).
//  3. What the inventory lists and the revision does not declare is pruned.
//  4. The inventory is set to exactly what the revision declares, in the
//     status patch that ends the sync.
//
// A crash before 1 completes created nothing. A crash between 1 and 4 leaves
// an inventory that lists every object the sync may have created (and
// perhaps some it did not: pruning an object that does not exist is a
// no-op), so the next sync, of whatever revision, prunes what that revision
// does not declare. A failed apply or prune ends the sync at its step, and
// the inventory keeps the union for the same reason. A revision that
// declares nothing new writes no inventory before applying, so a resync of
// an unchanged repository still writes nothing at all.
package gitops
