package gitops

import (
	"context"
	"errors"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// Stage is a step of a sync. A sync runs them in this order and stops at
// the first that fails.
type Stage string

const (
	// StageList lists what is live, when the sync needs it.
	StageList Stage = "list"
	// StageValidate dry-runs the declarations.
	StageValidate Stage = "validate"
	// StageReferences checks every reference against what is declared,
	// what is on the cluster and what the sync would prune.
	StageReferences Stage = "references"
	// StageInventory records what the sync may create before it exists.
	StageInventory Stage = "inventory"
	// StageApply applies the declarations that change something.
	StageApply Stage = "apply"
	// StagePrune deletes what the previous inventory lists and the
	// declarations no longer have.
	StagePrune Stage = "prune"
	// StageHealth waits for what was applied to be healthy.
	StageHealth Stage = "health"
)

// StageError is a sync stopped at Stage. Its message is the stage's own
// error, which callers word for their audience (a condition, a CLI line).
type StageError struct {
	Stage Stage
	Err   error
}

func (e *StageError) Error() string { return e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// StageOf is the stage err stopped a sync at, "" for an error of no stage.
func StageOf(err error) Stage {
	var se *StageError
	if errors.As(err, &se) {
		return se.Stage
	}
	return ""
}

// Sync is one sync of declarations to a cluster: the one pipeline the
// GitSync controller, `agentsandbox sync --once` and `agentsandbox diff`
// run, so all three validate, check references, record, apply and prune
// the same way (see the package comment for why in this order).
type Sync struct {
	Applier *applier.Applier
	// Declarations are the revision's objects, already labelled as their
	// owner's (applier.SetOwner).
	Declarations []declarations.Declaration
	// Previous is what earlier syncs applied: the inventory, or the
	// objects labelled as the owner's.
	Previous []v1.InventoryEntry
	// PruneOwner prunes the objects of Previous still labelled as its,
	// that the declarations no longer have; "" prunes nothing.
	PruneOwner string
	// Changed, when set, picks from the declarations those that may change
	// something, given what is live; the others are neither dry-run nor
	// applied (the controller's memo of what it applied). Nil picks all.
	Changed func(applier.Live) []declarations.Declaration
	// RecordInventory, when set, writes the inventory before anything is
	// applied, whenever the declarations add to Previous: the union of
	// the two, so a sync stopped at any later point leaves nothing the
	// next revision cannot prune. Nothing is applied unless it succeeds.
	RecordInventory func(context.Context, []v1.InventoryEntry) error
	// HealthInterval, when positive, waits for the declarations to be
	// healthy after the apply, looking every interval; zero does not wait.
	HealthInterval time.Duration
}

// Result is what a sync did, as far as it went.
type Result struct {
	// Planned is what the dry run said applying each picked declaration
	// does.
	Planned []applier.Change
	// Changes are the objects applied and pruned.
	Changes *ssa.ChangeSet
	// Inventory is what the declarations make the inventory; it is the
	// inventory only once the sync went past StagePrune (Applied).
	Inventory []v1.InventoryEntry
	// Applied: every declaration was applied and the stale objects pruned.
	Applied bool
}

// Run syncs: list, validate, references, inventory, apply, prune and, with a
// HealthInterval, health. An error is a *StageError naming where it
// stopped; a sync stopped before StageApply wrote nothing but the
// inventory.
func (s Sync) Run(ctx context.Context) (Result, error) {
	res := Result{Inventory: applier.Inventory(s.Declarations)}
	live, planned, err := s.validate(ctx, false)
	res.Planned = planned
	if err != nil {
		return res, err
	}
	if err := s.checkReferences(ctx); err != nil {
		return res, err
	}
	if s.RecordInventory != nil {
		if pending := union(s.Previous, res.Inventory); len(pending) > len(s.Previous) {
			if err := s.RecordInventory(ctx, pending); err != nil {
				return res, &StageError{StageInventory, err}
			}
		}
	}
	changes, err := s.Applier.Apply(ctx, planned)
	res.Changes = changes
	if err != nil {
		return res, &StageError{StageApply, err}
	}
	if s.PruneOwner != "" {
		pruned, err := s.Applier.Prune(ctx, s.Previous, res.Inventory, s.PruneOwner)
		if pruned != nil {
			res.Changes.Append(pruned.Entries)
		}
		if err != nil {
			return res, &StageError{StagePrune, err}
		}
	}
	res.Applied = true
	if s.HealthInterval > 0 {
		live.Record(planned)
		if err := s.Applier.WaitHealthy(ctx, s.Declarations, live, s.HealthInterval); err != nil {
			return res, &StageError{StageHealth, err}
		}
	}
	return res, nil
}

// Preview is what a sync would do, without doing it.
type Preview struct {
	// Changes say, field by field, what applying each declaration does.
	Changes []applier.Change
	// Pruned are the live objects the sync would delete.
	Pruned []*unstructured.Unstructured
}

// Preview runs a sync's checks (validate, references) and says what it
// would apply and prune, writing nothing.
func (s Sync) Preview(ctx context.Context) (Preview, error) {
	_, changes, err := s.validate(ctx, true)
	if err != nil {
		return Preview{}, err
	}
	if err := s.checkReferences(ctx); err != nil {
		return Preview{}, err
	}
	p := Preview{Changes: changes}
	if s.PruneOwner != "" {
		if p.Pruned, err = s.Applier.WouldPrune(ctx, s.Previous, applier.Inventory(s.Declarations), s.PruneOwner); err != nil {
			return Preview{}, &StageError{StagePrune, err}
		}
	}
	return p, nil
}

// validate dry-runs what Changed picks (all without it). What is live is
// listed only when something needs it: Changed, or the health wait.
func (s Sync) validate(ctx context.Context, detail bool) (applier.Live, []applier.Change, error) {
	todo := s.Declarations
	var live applier.Live
	if s.Changed != nil || s.HealthInterval > 0 {
		var err error
		if live, err = s.Applier.ListLive(ctx, s.Declarations); err != nil {
			return nil, nil, &StageError{StageList, err}
		}
	}
	if s.Changed != nil {
		todo = s.Changed(live)
	}
	planned, err := s.Applier.Validate(ctx, todo, detail)
	if err != nil {
		return live, nil, &StageError{StageValidate, err}
	}
	return live, planned, nil
}

// checkReferences refuses references to what is neither declared nor on
// the cluster, or about to be pruned.
func (s Sync) checkReferences(ctx context.Context) error {
	var pruning []v1.InventoryEntry
	if s.PruneOwner != "" {
		pruning = applier.Stale(s.Previous, applier.Inventory(s.Declarations))
	}
	if err := s.Applier.CheckReferences(ctx, s.Declarations, pruning); err != nil {
		return &StageError{StageReferences, err}
	}
	return nil
}

// union is a ∪ b, keeping a's order and appending what only b has.
func union(a, b []v1.InventoryEntry) []v1.InventoryEntry {
	seen := map[string]bool{}
	out := make([]v1.InventoryEntry, 0, len(a)+len(b))
	for _, e := range append(append([]v1.InventoryEntry{}, a...), b...) {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}
