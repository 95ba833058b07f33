package workflow

import "time"

// Rec is one record of an order (a step's, one item's of a forEach step,
// an undo action's) as the rules, the state store, the operator and the
// test kit read it: which record it is, the action it runs, where it
// stands and what its attempts did. The rules decide on its state and
// flags; its attempts' counts and last error they carry, as the state
// store keeps them.
type Rec struct {
	// Ref is which record it is: its step's Index in the workflow, Undo
	// for the step's undo action, and Item (from 1) for one item of a
	// forEach step.
	Ref
	// Action is what the record runs, as its order started with it: its
	// Name (unique in the workflow, and part of its idempotency key), its
	// Agent, the service's action (Do), the attempt's Timeout, MaxFailures
	// and RetryBackoff, and Async for a service that answers later. (The
	// state store keeps no Input: the order's stored definition has it.)
	Action
	// Kind is what the record does: call its agent, wait for an event, or
	// sleep.
	Kind Kind

	// State is where the record stands: Pending until claimed (and again
	// when an attempt is given back), Processing while an attempt runs,
	// then Processed, or Error when it failed for good.
	State State
	// Ready is set on a Pending record that was made ready (for a wait or
	// a timer: or parked): its start is due.
	Ready bool
	// DoneAt is when it was Processed or failed for good (zero until
	// then).
	DoneAt time.Time
	// Cause, for a record in Error, is why: refused by its service, given
	// up on, expired with its order, its answer over the limit.
	Cause Cause
	// LastError is the last error the record met, as kept (cut to
	// statestore.MaxRecordErrorBytes).
	LastError string

	// Attempt is the number of the record's latest attempt: 0 until it is
	// first claimed, then one more at each claim, in every round (so a
	// late reply of an earlier attempt stays fenced off).
	Attempt int
	// FailureCount is how many attempts of the round failed (timed out and
	// were given back by the Supervisor); at MaxFailures the record fails
	// for good.
	FailureCount int
	// Ran is set when the record may have taken effect though it is not
	// Processed: claimed in the round and then given up on (or its answer
	// was over the limit), or ready again after its attempt was recovered
	// (its answer lost).
	Ran bool
	// Retried is set when an earlier attempt of the round did not complete
	// and was given back (its FailureCount is not 0): whatever its last
	// attempt says, it may have taken effect.
	Retried bool
	// Accepted is set on an async attempt at work whose service accepted
	// the call: its Agent is done with it, and only its callback (hours
	// away, perhaps) can end it.
	Accepted bool

	// HasUndo is set on a step's record whose step has an undo action.
	HasUndo bool
	// NothingToUndo is set on a step's record whose step says it changes
	// nothing to undo (Step.NoUndo): no undo runs, and it is no pivot.
	NothingToUndo bool
	// HoldFor > 0: a step's record whose failure for good holds the order
	// (Held) for the operator, this long at most, rather than undoing it.
	HoldFor time.Duration
}

// RecordName is the record's name for people and keys: its action's, with
// its item for a forEach step's (RecordName).
func (r Rec) RecordName() string { return RecordName(r.Name, r.Ref) }
