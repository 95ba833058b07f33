package explore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// check says which of the invariants the run broke, if any: each order's
// end as the store has it against what the services applied, the claims
// and the alerts; then the flow control (slots, calls in flight per key,
// the rate) and DynamoDB's limits.
func (w *World) check(ctx context.Context) []string {
	var bad []string
	for _, o := range w.orders {
		bad = append(bad, w.checkOrder(ctx, o)...)
	}
	bad = append(bad, w.checkClaims()...)
	bad = append(bad, w.checkFlow(ctx)...)
	bad = append(bad, w.checkRejected()...)
	bad = append(bad, w.checkClearCopies()...)
	for _, m := range w.movedAtWork {
		bad = append(bad, "no order moves while an attempt of it could run: "+m)
	}
	bad = append(bad, w.checkSearch(ctx)...)
	bad = append(bad, w.bulkBad...)
	for _, in := range w.svc.inputs {
		bad = append(bad, "a service receives its step's input as it was kept: "+in)
	}
	return append(bad, w.checkLimits()...)
}

// checkRejected checks that no message the pipeline sent itself (on the
// Scheduler's and the Agents' queues) was rejected as invalid: only what
// comes from outside (an order, an event, a callback) may be; and that
// SQS took every message it sent (the explorer's queues refuse what SQS
// refuses: over 256 KiB, or a character it takes not).
func (w *World) checkRejected() []string {
	dlqs := []string{w.topo.SchedulerQueue().DLQName}
	for _, a := range w.def.Agents() {
		dlqs = append(dlqs, w.topo.AgentRequests(a).DLQName, w.topo.AgentResponses(a).DLQName)
	}
	var bad []string
	w.q.mu.Lock()
	for _, r := range w.q.refused {
		bad = append(bad, "the pipeline's own messages are valid: SQS refuses a send: "+r)
	}
	for _, r := range w.q.outside {
		bad = append(bad, "the explorer sends only what SQS takes (a defect of the explorer's): SQS refuses "+r)
	}
	w.q.mu.Unlock()
	for _, q := range dlqs {
		for _, m := range w.q.in(q) {
			bad = append(bad, fmt.Sprintf("the pipeline's own messages are valid: %s rejected %s (%s)", q, brief(m.body),
				aws.ToString(m.attrs["RejectReason"].StringValue)))
			if len(bad) == 3 {
				return bad
			}
		}
	}
	return bad
}

// checkClearCopies checks, in a sealed run, that no body sent by pointer
// stays in clear under incoming/ once a delivery of it took it (ended well,
// not rejected to the DLQ): taken, it is written over. One refused, or
// whose message was lost before any delivery, keeps it, to expire. And
// every payload the orders keep under orders/ (an order, a result, an
// event's data, an operator's skip) is sealed in the object form, which
// weighs its plaintext (seal.IsObject), under a key that says so.
func (w *World) checkClearCopies() []string {
	if w.sealer == nil || w.bucket == nil {
		return nil
	}
	var bad []string
	for _, ptr := range slices.Sorted(maps.Keys(w.takenPointers)) {
		_, key, _ := offload.Pointer(ptr)
		if body := w.offloaded[ptr]; string(w.bucket.object(key)) == body {
			bad = append(bad, fmt.Sprintf("a sealed run leaves no clear copy of what it took: %s still holds %s", key, brief(body)))
		}
	}
	for _, key := range w.bucket.keys(offload.OrdersPrefix) {
		if b := w.bucket.object(key); !seal.IsObject(b) || !strings.HasSuffix(key, payload.SealedSuffix) {
			bad = append(bad, fmt.Sprintf("a sealed run keeps its payloads sealed in the object form: %s holds %.60q", key, b))
		}
	}
	return bad
}

// checkOrder checks o's end.
func (w *World) checkOrder(ctx context.Context, o *order) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, o.id+": "+fmt.Sprintf(format, args...)) }
	task, recs, err := w.store.Load(ctx, o.id)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", o.id, err)}
	}
	o.end = task
	if !task.State.Ended() {
		fail("no lost order: it is %s", task.State)
	}
	for _, r := range recs {
		if r.FailureCount > r.MaxFailures {
			fail("bounded retries: %s failed %d times, over its %d", r.RecordName(), r.FailureCount, r.MaxFailures)
		}
		if r.State == workflow.Error && !r.Alerted {
			fail("every failure alerted: %s is in Error, not alerted", r.RecordName())
		}
	}
	def := w.defOf(task.Version)
	for _, b := range w.effects(task, recs) {
		fail("%s", b)
	}
	for _, b := range w.undoOrder(def, recs) {
		fail("%s", b)
	}
	alerts := w.alertsOf(o.id)
	if task.State == workflow.CompensationFailed && len(alerts) == 0 {
		fail("CompensationFailed is alerted: no alert was published")
	}
	if task.State == workflow.CompensationFailed && w.whyCompensationFailed(def, recs) == "" {
		fail("CompensationFailed only where a pivot ran or an undo failed for good: no step without an undo may have run, " +
			"no undo failed")
	}
	undone := false
	for _, r := range recs {
		undone = undone || (r.Undo && w.ledger.at(w.key(r)) >= 0)
	}
	for _, a := range alerts {
		if a.OrderState == workflow.Failed && undone && !a.Undo {
			fail("alerts say what the failure decided: %s's alert says %q, and undo actions ran", a.StepName, a.Compensation)
		}
	}
	if !w.faults && !o.cancelled && task.State != workflow.Processed && !w.timedOutWait(recs) {
		fail("waiting is not failing: with no fault, the order ended %s", task.State)
	}
	return bad
}

// effects checks that what the services applied matches task's end:
// everything for a Processed order and nothing undone; everything done
// undone after a failure; no effect after its undo.
func (w *World) effects(task statestore.Task, recs []statestore.Step) []string {
	var bad []string
	byRef := map[workflow.Ref]statestore.Step{}
	for _, r := range recs {
		byRef[r.Ref] = r
	}
	applied := func(r statestore.Step) bool { return w.ledger.at(w.key(r)) >= 0 }
	for _, r := range recs {
		if r.Undo || r.Kind != workflow.KindAgent {
			continue
		}
		u, hasUndo := byRef[workflow.UndoOf(r.Ref)]
		switch {
		case task.State == workflow.Processed && !applied(r) && !w.skipped[w.key(r)]:
			bad = append(bad, fmt.Sprintf("a Processed order has every effect: %s's was never applied", r.RecordName()))
		case task.State == workflow.Processed && hasUndo && applied(u):
			bad = append(bad, fmt.Sprintf("a Processed order undid nothing: %s was undone", r.RecordName()))
		case (task.State == workflow.Failed || task.State == workflow.Cancelled) && applied(r) && !(hasUndo && applied(u)) && !r.NothingToUndo:
			bad = append(bad, fmt.Sprintf("everything done is undone after a failure: %s took effect and was not undone (the order is %s)",
				r.RecordName(), task.State))
		case hasUndo && applied(u) && applied(r) && w.ledger.at(w.key(u)) < w.ledger.at(w.key(r)):
			bad = append(bad, fmt.Sprintf("an effect comes before its undo: %s was applied after its undo", r.RecordName()))
		}
	}
	return bad
}

// whyCompensationFailed says why an order whose records are recs may end
// CompensationFailed ("": no reason): a step without an undo (a pivot) that
// may have run (a call of it reached its service and was not refused, an
// attempt of it was killed after its claim, or its operator skipped it), or
// an undo that failed for good.
func (w *World) whyCompensationFailed(def workflow.Definition, recs []statestore.Step) string {
	for _, r := range recs {
		switch {
		case r.Undo && r.State == workflow.Error:
			return r.RecordName() + " failed for good"
		case r.Undo || r.Kind != workflow.KindAgent || def.Steps[r.Index].Undo != nil:
		case w.mayHaveRun(w.key(r)) || w.skipped[w.key(r)]:
			return r.RecordName() + ", a pivot, may have run"
		}
	}
	return ""
}

// checkClaims checks that nothing was claimed before what it needs was
// done, and that each record's attempts were claimed one after another.
func (w *World) checkClaims() []string {
	var bad []string
	type rec struct {
		order string
		ref   workflow.Ref
	}
	last := map[rec]int{}
	for _, c := range w.claims {
		if !c.needsMet {
			bad = append(bad, fmt.Sprintf("nothing starts before its needs: %s %v claimed (attempt %d) before every step it needs was done",
				c.order, c.ref, c.attempt))
		}
		k := rec{c.order, c.ref}
		if c.attempt <= last[k] {
			bad = append(bad, fmt.Sprintf("exclusive claim: %s %v attempt %d claimed after attempt %d", c.order, c.ref, c.attempt, last[k]))
		}
		last[k] = c.attempt
	}
	return bad
}

// alertsOf are the alerts published about order id.
func (w *World) alertsOf(id string) []alert.Failure {
	var out []alert.Failure
	for _, a := range w.alerts {
		if a.OrderID == id {
			out = append(out, a)
		}
	}
	return out
}

// undoOrder checks that undo actions ran after the undo actions of the
// records that ran after their own (a step's undo before those of the steps
// it needs, whatever the shape).
func (w *World) undoOrder(def workflow.Definition, recs []statestore.Step) []string {
	var bad []string
	byRef := map[workflow.Ref]statestore.Step{}
	for _, r := range recs {
		byRef[r.Ref] = r
	}
	for _, r := range recs {
		if r.Undo || w.ledger.at(w.key(byRef[workflow.UndoOf(r.Ref)])) < 0 {
			continue
		}
		for _, q := range recs {
			if q.Undo || !needsOf(def, r.Index)[q.Index] {
				continue
			}
			ur, uq := w.ledger.at(w.key(byRef[workflow.UndoOf(r.Ref)])), w.ledger.at(w.key(byRef[workflow.UndoOf(q.Ref)]))
			if uq >= 0 && uq < ur {
				bad = append(bad, fmt.Sprintf("undo order: %s was undone before %s, which needs it", q.RecordName(), r.RecordName()))
			}
		}
	}
	return bad
}

// needsOf are the steps step i of def needs, directly or not.
func needsOf(def workflow.Definition, i int) map[int]bool {
	out := map[int]bool{}
	var walk func(int)
	walk = func(j int) {
		for _, n := range def.Needs(j) {
			if !out[n] {
				out[n] = true
				walk(n)
			}
		}
	}
	walk(i)
	return out
}

// key is record r's idempotency key (round 1: the explorer resubmits
// nothing).
func (w *World) key(r statestore.Step) string {
	if r.OrderID == "" {
		return ""
	}
	return w.aliasKey(r.OrderID, r.Name, r.Ref)
}

// timedOutWait reports whether a wait of the order timed out: a deadline the
// workflow set, no fault.
func (w *World) timedOutWait(recs []statestore.Step) bool {
	for _, r := range recs {
		if r.Kind == workflow.KindEvent && r.State == workflow.Error {
			return true
		}
	}
	return false
}
