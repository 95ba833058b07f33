package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Violations are the orders that broke each invariant.
type Violations struct {
	Lost          []string `json:"lost"`          // 1: accepted but no task
	NotEnded      []string `json:"notEnded"`      // 1: task not in an end state
	AppliedTwice  []string `json:"appliedTwice"`  // 5: an effect applied more than once
	Inconsistent  []string `json:"inconsistent"`  // the effects do not match the end state
	OverThreshold []string `json:"overThreshold"` // 4: FailureCount past MaxFailures
	Unalerted     []string `json:"unalerted"`     // 1, 4: an Error record whose alert was never confirmed
	Unrejected    []string `json:"unrejected"`    // 7: a bad input or refused event not in the DLQ with its reason
	// The flow control's (Plan.Flow): a span of a rate limit's period with
	// more calls than the limit and its burst (and one for clock edges); a
	// slot held or reserved, or a place in a key's line kept, for an ended
	// order; an order held on failure that did not end; a rate limit that
	// delivered less than MinDelivered of its rate while a backlog of
	// ready requests lasted (at least MinBacklog of it).
	RateExceeded []string `json:"rateExceeded,omitempty"`
	RateShort    []string `json:"rateShort,omitempty"`
	SlotsLeft    []string `json:"slotsLeft,omitempty"`
	HeldNotEnded []string `json:"heldNotEnded,omitempty"`
	// ClearCopies, in a sealed run (Plan.Seal): a body sent by pointer
	// left in clear under incoming/ once taken, an object under orders/
	// not in the sealed object form (clearCopies), or a key of an agent's
	// calls in flight kept by its value, not its name (keyname.Namer).
	ClearCopies []string `json:"clearCopies,omitempty"`
	// TooLarge: a step failed for a size within the limits every order of
	// the run keeps (an order at the limits among them: Plan.AtLimit), its
	// document over its Agent's budget or its answer over its limit.
	TooLarge []string `json:"tooLarge,omitempty"`
	// The sizes of what travels and is kept (checkSizes): a message
	// delivered over SQS's 256 KiB, a send SQS refused, an item over
	// DynamoDB's 400 KB (OverLimit); a message refused to a DLQ for its
	// size or its encoding, or left in the DLQ of a queue only the product
	// writes to (Refused); with flow control, calls given back for a full
	// line while their key's line was short (LinesRefused: their request
	// too large to queue).
	OverLimit    []string `json:"overLimit,omitempty"`
	Refused      []string `json:"refused,omitempty"`
	LinesRefused []string `json:"linesRefused,omitempty"`
	// MovedAtWork: an effect a service applied after an order's move by
	// an attempt claimed before it (Plan.Migrate): the order moved while
	// an attempt of it could run.
	MovedAtWork []string `json:"movedAtWork,omitempty"`
	// Unfound: a search by a searchable field's value (Plan.Search), at the
	// end or while the orders ran, that missed an order carrying it on a
	// workflow that declares the field (stored by then), found one that
	// does not, or found one twice.
	Unfound []string `json:"unfound,omitempty"`
	// BulkReports: a bulk action's report (Plan.Bulk) that does not add
	// up: done, done already, refused, changed and left against the orders
	// listed; an order acted on twice; an order listed that does not carry
	// the value searched.
	BulkReports []string `json:"bulkReports,omitempty"`
}

// Count is the number of violations.
func (v Violations) Count() int {
	return len(v.Lost) + len(v.NotEnded) + len(v.AppliedTwice) + len(v.Inconsistent) + len(v.OverThreshold) + len(v.Unalerted) +
		len(v.Unrejected) + len(v.RateExceeded) + len(v.RateShort) + len(v.SlotsLeft) + len(v.HeldNotEnded) + len(v.ClearCopies) +
		len(v.TooLarge) + len(v.OverLimit) + len(v.Refused) + len(v.LinesRefused) + len(v.MovedAtWork) + len(v.Unfound) +
		len(v.BulkReports)
}

// Check checks the invariants over the submitted orders, from every record
// of the state table and the remote services' ledger; each order against
// the workflow of set it ran.
func Check(set workflow.Set, ids []string, tasks map[string]statestore.Task,
	records map[string][]statestore.Step, ledger []remotesim.Effect) (Violations, map[workflow.State]int) {
	return checkSkipped(set, ids, tasks, records, ledger, nil)
}

// checkSkipped is Check where the operator skipped some held records with a
// result ("ORDER RECORD" in skipped): each is done though its service may
// never have applied it.
func checkSkipped(set workflow.Set, ids []string, tasks map[string]statestore.Task,
	records map[string][]statestore.Step, ledger []remotesim.Effect, skipped map[string]bool) (Violations, map[workflow.State]int) {
	return judge{set: set, skipped: skipped}.check(ids, tasks, records, ledger)
}

// judge is what the checker judges the orders by.
type judge struct {
	set workflow.Set // the workflows as the orders started them
	// defs are the definitions of the orders that moved to another version
	// of their workflow, by order: the version each runs now (its records
	// are its steps), with the undo actions it keeps of the version that
	// ran a step.
	defs map[string]workflow.Definition
	// versions are the other versions the orders may have moved to, by
	// workflow: the names each action had in either.
	versions map[string]version
	// moves are when each order moved.
	moves map[string][]moveWindow
	// skipped are the held records the operator skipped with a result
	// ("ORDER RECORD").
	skipped map[string]bool
}

// definition is the definition order t runs now.
func (j judge) definition(t statestore.Task) (workflow.Definition, bool) {
	if d, ok := j.defs[t.OrderID]; ok {
		return d, true
	}
	return j.set.Get(t.Workflow)
}

// names are the names action name of workflow wf may have had.
func (j judge) names(wf, name string) []string {
	if v, ok := j.versions[wf]; ok {
		return v.names(name)
	}
	return []string{name}
}

// check checks the invariants over the orders ids.
func (j judge) check(ids []string, tasks map[string]statestore.Task, records map[string][]statestore.Step,
	ledger []remotesim.Effect) (Violations, map[workflow.State]int) {
	var v Violations
	ends := map[workflow.State]int{}
	effects := map[string]map[string]int{} // order → step or undo name/round → times applied
	byOrder := map[string][]remotesim.Effect{}
	for _, e := range ledger {
		if effects[e.OrderID] == nil {
			effects[e.OrderID] = map[string]int{}
		}
		effects[e.OrderID][nameOf(e)+"/r"+strconv.Itoa(roundOf(e.Key))]++
		byOrder[e.OrderID] = append(byOrder[e.OrderID], e)
	}
	for _, id := range ids {
		t, ok := tasks[id]
		switch {
		case !ok:
			v.Lost = append(v.Lost, id)
			continue
		case !t.State.Ended():
			v.NotEnded = append(v.NotEnded, id)
		}
		ends[t.State]++
		for k, n := range effects[id] {
			if n > 1 {
				v.AppliedTwice = append(v.AppliedTwice, id+" "+k)
			}
		}
		for _, r := range records[id] {
			if r.FailureCount > r.MaxFailures {
				v.OverThreshold = append(v.OverThreshold, fmt.Sprintf("%s %s %d/%d", id, r.Name, r.FailureCount, r.MaxFailures))
			}
			if r.State == workflow.Error && !r.Alerted {
				v.Unalerted = append(v.Unalerted, id+" "+r.Name)
			}
			if tooLarge(r.LastError) {
				v.TooLarge = append(v.TooLarge, id+" "+r.RecordName()+": "+r.LastError)
			}
		}
		v.MovedAtWork = append(v.MovedAtWork, j.movedAtWork(t, records[id], byOrder[id])...)
		def, ok := j.definition(t)
		if !ok {
			v.Inconsistent = append(v.Inconsistent, id+": ran workflow "+t.Workflow+", which the run does not have")
			continue
		}
		skip := func(name string) bool { return j.skipped[id+" "+name] }
		names := func(name string) []string { return j.names(t.Workflow, name) }
		if why := consistent(def, t, records[id], effects[id], skip, names); why != "" {
			v.Inconsistent = append(v.Inconsistent, id+": "+why)
		}
	}
	for _, l := range [][]string{v.Lost, v.NotEnded, v.AppliedTwice, v.Inconsistent, v.OverThreshold, v.Unalerted, v.Unrejected, v.TooLarge,
		v.MovedAtWork} {
		slices.Sort(l)
	}
	return v, ends
}

// stamp is how the checker writes a moment: to the millisecond.
const stamp = "15:04:05.000"

// movedAtWork finds the effects of order t applied after one of its moves
// by an attempt claimed before it: the latest attempt of the effect's
// record (by any of its names) claimed before the move began, the effect
// applied after it ended. (A record claimed again since hides an earlier
// attempt: what this finds, it finds for sure.)
// claimLag is the longest a claim's write may land after the time it
// carries (its ClaimedAt, the claimant's clock before it wrote): the SDK's
// tries of a request the store faults failed, at the standard retryer's
// backoff (up to 1 s, then 2 s), on a loaded machine. A claim whose time
// is within it of a move may have been written after the move, on the
// version the order then ran (an order moved back runs its first version
// again): the move could not see it, and its request was the order's own.
// Two chaos runs (seed 20261207, --migrate 0.5) judged such claims, 0.2 s
// and 1.3 s before their move, moved while at work.
const claimLag = 5 * time.Second

func (j judge) movedAtWork(t statestore.Task, recs []statestore.Step, effects []remotesim.Effect) []string {
	moves := j.moves[t.OrderID]
	if len(moves) == 0 {
		return nil
	}
	claimed := map[string]statestore.Step{} // a record, by any of its names
	for _, r := range recs {
		for _, n := range j.names(t.Workflow, r.Name) {
			claimed[workflow.RecordName(n, r.Ref)] = r
		}
	}
	var out []string
	for _, e := range effects {
		r, ok := claimed[nameOf(e)]
		if !ok || r.ClaimedAt.IsZero() {
			continue
		}
		for _, m := range moves {
			if r.ClaimedAt.Before(m.From.Add(-claimLag)) && e.AppliedAt.After(m.To) {
				var history []string
				for _, mv := range t.Moves {
					history = append(history, mv.At.Format(stamp)+" "+mv.What)
				}
				out = append(out, fmt.Sprintf("%s %s: applied at %s by attempt %d (%s now), claimed at %s, before its move at %s–%s (%s)",
					t.OrderID, nameOf(e), e.AppliedAt.Format(stamp), r.Attempt, r.State, r.ClaimedAt.Format(stamp), m.From.Format(stamp),
					m.To.Format(stamp), strings.Join(history, "; ")))
				break
			}
		}
	}
	return out
}

// tooLarge reports whether a record's error says its step failed for a
// size: its document over its Agent's budget (kept.DocumentError), its
// answer over its workflow's result limit.
func tooLarge(lastError string) bool {
	return strings.Contains(lastError, "its agent reads for one call") || strings.Contains(lastError, "-byte result limit")
}

// consistent compares an ended task's records with the effects of its last
// round. A Processed order has every record's effect once and no undo. A
// Failed or Cancelled order has, for each completed record (a step, or one
// item of a forEach step), its effect and its undo once; a record that may
// have taken effect (given up on after an attempt, its answer over the
// limit, or stopped after an attempt was recovered) had its undo run either way (without an undo it must not have taken
// effect); a record that never ran has nothing. A record the operator
// skipped (a held one, taken as done) took effect at most once, and is
// undone as a completed one is. A new step an order moved past (recorded
// skipped by the move) took no effect and has nothing undone. An action's
// effects count under every name it had in the versions the order ran
// (names: a renamed step), and a step is undone by the undo of the version
// that ran it, as the order's definition keeps it, never by another.
func consistent(def workflow.Definition, t statestore.Task, recs []statestore.Step, applied map[string]int,
	skipped func(name string) bool, names func(name string) []string) string {
	if !t.State.Ended() || t.State == workflow.CompensationFailed {
		return "" // an operator's case: the alert says which undo did not happen
	}
	round := "/r" + strconv.Itoa(t.Round)
	count := func(name string, ref workflow.Ref) (n, others int) {
		for i, alias := range names(name) {
			if i == 0 {
				n = applied[workflow.RecordName(alias, ref)+round]
			} else {
				others += applied[workflow.RecordName(alias, ref)+round]
			}
		}
		return n, others
	}
	for _, r := range recs {
		if r.Undo || r.Index >= len(def.Steps) || def.Steps[r.Index].Kind() != workflow.KindAgent {
			continue // an undo is judged with its step; a wait or a timer has no effect of its own
		}
		st, name := def.Steps[r.Index], r.RecordName()
		did, before := count(r.Name, r.Ref)
		did += before // a renamed step's effect is under the name it had then
		undid := 0
		if st.Undo != nil {
			var wrong int
			if undid, wrong = count(st.Undo.Name, r.Ref); wrong > 0 {
				return fmt.Sprintf("step %s was undone %d times by another action than %s, the undo of the version that ran it",
					name, wrong, st.Undo.Name)
			}
		}
		if movedPast(r) {
			if did != 0 || undid != 0 {
				return fmt.Sprintf("step %s, skipped by a move, applied %d times, undone %d times", name, did, undid)
			}
			continue
		}
		// May have taken effect: given up on after an attempt, its answer
		// over the limit, or stopped by the undoing after an attempt was
		// recovered. A record never claimed did nothing: as a refusal.
		ran := r.Ran
		if r.State == workflow.Processed && skipped(name) {
			if did > 1 || (t.State == workflow.Processed && undid != 0) || (t.State != workflow.Processed && undid != boolInt(st.Undo != nil)) {
				return fmt.Sprintf("%s but skipped step %s applied %d times, undone %d times", t.State, name, did, undid)
			}
			continue
		}
		switch {
		case t.State == workflow.Processed && (did != 1 || undid != 0):
			return fmt.Sprintf("Processed but %s applied %d times, undone %d times", name, did, undid)
		case t.State == workflow.Processed:
		case r.State == workflow.Processed && (did != 1 || undid != boolInt(st.Undo != nil)):
			return fmt.Sprintf("%s but completed step %s applied %d times, undone %d times", t.State, name, did, undid)
		case ran && st.Undo != nil && undid != 1:
			return fmt.Sprintf("step %s may have taken effect (%s after attempt %d) but its undo ran %d times", name, r.State, r.Attempt, undid)
		case ran && st.Undo == nil && did != 0:
			return fmt.Sprintf("step %s took effect (%s after attempt %d) and has no undo", name, r.State, r.Attempt)
		case !ran && r.State != workflow.Processed && (did != 0 || undid != 0):
			return fmt.Sprintf("step %s is %s but was applied %d times, undone %d times", name, r.State, did, undid)
		}
	}
	return ""
}

// movedPast reports whether r is a new step's record that its order's move
// recorded skipped (statestore.Store.Migrate): done, never claimed since.
// Its attempt count says nothing: a record made at a key where the order's
// earlier record had attempts keeps their count (attempt numbers never go
// back at a key), and the judge took such skips for steps that took no
// effect (seed 20261222, unsealed, 300 orders: five orders whose added
// first step was skipped).
func movedPast(r statestore.Step) bool {
	if r.State != workflow.Processed {
		return false
	}
	var skipped time.Time
	for _, e := range r.Incidents {
		if strings.HasPrefix(e.What, "skipped: the order was past it") && e.At.After(skipped) {
			skipped = e.At
		}
	}
	return !skipped.IsZero() && !r.ClaimedAt.After(skipped)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nameOf is the step or undo action whose effect e is, read from its
// idempotency key (workflow.IdempotencyKey: ORDER/NAME or ORDER/NAME/rN).
func nameOf(e remotesim.Effect) string {
	name := strings.TrimPrefix(e.Key, e.OrderID+"/")
	if i := strings.LastIndex(name, "/r"); i >= 0 {
		if _, err := strconv.Atoi(name[i+2:]); err == nil {
			return name[:i]
		}
	}
	return name
}

// roundOf reads the round from an idempotency key (workflow.IdempotencyKey).
func roundOf(key string) int {
	if i := strings.LastIndex(key, "/r"); i >= 0 {
		if n, err := strconv.Atoi(key[i+2:]); err == nil {
			return n
		}
	}
	return 1
}
