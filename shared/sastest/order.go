package sastest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Order is one order the kit runs: its state by the workflow's rules and
// what each of its records did.
type Order struct {
	k       *Kit
	ID      string
	body    json.RawMessage
	state   workflow.Order
	rec     map[workflow.Ref]*starting
	results map[workflow.Ref]json.RawMessage
	kept    map[string]json.RawMessage // events received before their wait was ready
	undone  []string                   // the undo actions done, in order
	ended   time.Time
}

// starting is what the kit keeps of a record's start beside the record
// itself (the rules' workflow.Rec, which holds its attempts, failures and
// last error, as the state store does).
type starting struct {
	armed bool // a wait or a timer, ready and waiting
	// admitting: its agent's flow control holds its next attempt (in its
	// key's line, or waiting for its rate turn); slot: it holds a slot of
	// its key for its next attempt.
	admitting, slot bool
}

// Step is one record of the order as a test reads it: the record as the
// engine, the state store and the operator read it (workflow.Rec): its
// State, Attempt (its attempts so far), FailureCount (those that did not
// complete, up to its maxFailures), Cause (of an Error) and LastError;
// RecordName is its name (step#N for a forEach item).
type Step = workflow.Rec

// State is the order's state: Pending, Held, Compensating, or its end.
func (o *Order) State() workflow.State { return o.state.State }

// Result is the result of the record named name (a step's, an undo's, or
// step#N an item's), nil if it has none. A forEach step's (or its undo's)
// is its items' results as a JSON list, in item order, null for an item
// with none: what the steps after it read as .results.<step>.
func (o *Order) Result(name string) json.RawMessage {
	var items []json.RawMessage
	for ref, r := range o.state.Recs {
		switch {
		case workflow.RecordName(r.Name, ref) == name:
			return o.results[ref]
		case ref.Item > 0 && r.Name == name:
			if len(items) < ref.Item {
				items = append(items, make([]json.RawMessage, ref.Item-len(items))...)
			}
			items[ref.Item-1] = o.results[ref]
		}
	}
	if items == nil {
		return nil
	}
	for i, res := range items {
		if res == nil {
			items[i] = json.RawMessage("null")
		}
	}
	b, err := json.Marshal(items)
	if err != nil {
		return nil
	}
	return b
}

// Step is the record named name (a step's, an undo's, step#N an item's);
// ok is false if the order has none.
func (o *Order) Step(name string) (Step, bool) {
	for _, r := range o.state.Recs {
		if r.RecordName() == name {
			return r, true
		}
	}
	return Step{}, false
}

// Undone are the undo actions the order ran, in the order they were done.
func (o *Order) Undone() []string { return slices.Clone(o.undone) }

// EndedAt is when the order ended (zero while it has not).
func (o *Order) EndedAt() time.Time { return o.ended }

// update changes record ref as the kit keeps it (what the rules carry and
// do not decide: its attempts, failures, last error).
func (o *Order) update(ref workflow.Ref, change func(*workflow.Rec)) {
	r := o.state.Recs[ref]
	change(&r)
	o.state.Recs[ref] = r
}

func (o *Order) schedule(at time.Time, internal bool, fn func()) {
	o.k.at(at, internal, nil, fn)
}

// current reports whether attempt of ref is still at work.
func (o *Order) current(ref workflow.Ref, attempt int) func() bool {
	return func() bool { r := o.state.Recs[ref]; return r.State == workflow.Processing && r.Attempt == attempt }
}

// waiting reports whether ref, a wait or a timer, still waits.
func (o *Order) waiting(ref workflow.Ref) func() bool {
	return func() bool {
		r := o.state.Recs[ref]
		return r.State == workflow.Pending && o.rec[ref].armed && o.state.Active(r)
	}
}

// ready starts record ref now.
func (o *Order) ready(ref workflow.Ref) {
	o.schedule(o.k.now, true, func() { o.start(ref) })
}

// start starts record ref, if it is still ready to run: an agent's call, a
// wait armed, a timer set.
func (o *Order) start(ref workflow.Ref) {
	r := o.state.Recs[ref]
	if r.State != workflow.Pending || !r.Ready || !o.state.Active(r) || o.rec[ref].armed {
		return // stopped, or started already
	}
	switch r.Kind {
	case workflow.KindEvent:
		o.arm(ref)
	case workflow.KindTimer:
		o.sleep(ref)
	default:
		o.admit(ref)
	}
}

// document is what record ref's action receives: the order, the results of
// the records done, its item, and for an undo its step's result.
func (o *Order) document(ref workflow.Ref) (workflow.Document, error) {
	doc := workflow.Document{Order: o.body, Results: map[string]json.RawMessage{}}
	items := map[int]int{} // each forEach step's item count
	for r := range o.state.Recs {
		if r.Item > 0 && !r.Undo {
			items[r.Index]++
		}
	}
	lists := map[int][]json.RawMessage{} // a forEach step's result: its items', in order (null: no answer)
	for r, res := range o.results {
		rec := o.state.Recs[r]
		if rec.State != workflow.Processed {
			continue
		}
		if r.Item > 0 && !r.Undo {
			if lists[r.Index] == nil {
				lists[r.Index] = slices.Repeat([]json.RawMessage{json.RawMessage("null")}, items[r.Index])
			}
			lists[r.Index][r.Item-1] = res
		} else {
			doc.Results[rec.Name] = res
		}
		if ref.Undo && r == (workflow.Ref{Index: ref.Index, Item: ref.Item}) {
			doc.Result = res
		}
	}
	for i, list := range lists {
		b, err := json.Marshal(list)
		if err != nil {
			return doc, err
		}
		doc.Results[o.k.def.Steps[i].Name] = b
	}
	if ref.Item > 0 {
		item, err := o.k.def.Item(o.body, ref.Index, ref.Item)
		if err != nil {
			return doc, err
		}
		index := ref.Item - 1
		doc.Item, doc.Index = item, &index
	}
	return doc, nil
}

// claim starts an attempt of agent record ref and calls its service.
func (o *Order) claim(ref workflow.Ref) {
	a := o.state.Recs[ref].Action
	o.state = o.state.Claimed(ref)
	o.update(ref, func(r *workflow.Rec) { r.Attempt++ })
	o.rec[ref].admitting = false
	attempt, completeBy := o.state.Recs[ref].Attempt, o.k.now.Add(a.Timeout)
	doc, err := o.document(ref)
	var in json.RawMessage
	if err == nil {
		in, err = a.InputFor(doc)
	}
	if err != nil { // the step cannot be given what it needs: refused
		o.fail(ref, workflow.Refused, false, err.Error())
		return
	}
	async := !ref.Undo && o.k.def.Steps[ref.Index].Async
	c := Call{OrderID: o.ID, Agent: a.Agent, Action: a.DoName(), Step: workflow.RecordName(a.Name, ref), Undo: ref.Undo, Item: ref.Item,
		Attempt: attempt, Key: workflow.IdempotencyKey(o.ID, workflow.RecordName(a.Name, ref), 1), Input: in}
	if async {
		c.Token = fmt.Sprintf("%s/%s/%d", o.ID, c.Step, attempt)
	}
	// An attempt that does not complete ends at its CompleteBy, a failure.
	o.k.at(completeBy, !async, o.current(ref, attempt), func() { o.attemptEnded(ref, attempt) })
	o.call(ref, c, completeBy, 50*time.Millisecond, true)
}

// call makes one call of an attempt, and the Agent's retries of a
// transient failure within it. Each takes a turn of its agent's rate limit
// (turned: the attempt's first, whose turn its admission took): one whose
// turn is past its CompleteBy is not made.
func (o *Order) call(ref workflow.Ref, c Call, completeBy time.Time, backoff time.Duration, turned bool) {
	if !o.current(ref, c.Attempt)() {
		return
	}
	if !turned {
		if ok, next := o.k.turn(c.Agent); !ok {
			if next.Before(completeBy) {
				o.k.at(next, true, o.current(ref, c.Attempt), func() { o.call(ref, c, completeBy, backoff, false) })
			}
			return
		}
	}
	c.At = o.k.now
	o.k.calls = append(o.k.calls, c)
	ans := o.k.handler(c.Agent)(c)
	if c.Token != "" && ans.kind == answerOK {
		ans = Accept() // an async service's 2xx accepts the call
	}
	switch ans.kind {
	case answerTransient:
		o.update(ref, func(r *workflow.Rec) { r.LastError = ans.reason })
		if next := o.k.now.Add(backoff); next.Before(completeBy) {
			o.k.at(next, true, o.current(ref, c.Attempt), func() { o.call(ref, c, completeBy, min(2*backoff, 2*time.Second), false) })
		}
	case answerHang:
	case answerAccept:
		o.k.tokens[c.Token] = token{orderID: o.ID, ref: ref, attempt: c.Attempt}
		if ans.later != nil {
			later := *ans.later
			o.k.at(o.k.now.Add(ans.after), true, o.current(ref, c.Attempt), func() { _ = o.k.Callback(c.Token, later) })
		}
	default:
		o.answered(ref, ans)
	}
}

// answered records an answer of the current attempt of ref.
func (o *Order) answered(ref workflow.Ref, a Answer) {
	switch {
	case a.kind == answerRefuse:
		o.fail(ref, workflow.Refused, false, a.reason)
	case len(a.result) > o.k.limitOf() && ref.Undo: // an undo took effect: its answer is not kept
		o.complete(ref, nil)
	case len(a.result) > o.k.limitOf():
		o.fail(ref, workflow.Oversized, true, fmt.Sprintf("answered %d bytes, over the %d-byte result limit", len(a.result), o.k.limitOf()))
	default:
		o.complete(ref, a.result)
	}
}

// attemptEnded: attempt of ref did not complete by its CompleteBy. It
// failed (it may have taken effect): retried after the step's backoff, or,
// at maxFailures, failed for good.
func (o *Order) attemptEnded(ref workflow.Ref, attempt int) {
	if !o.current(ref, attempt)() {
		return
	}
	a := o.state.Recs[ref].Action
	o.update(ref, func(r *workflow.Rec) {
		r.FailureCount++
		if r.LastError == "" {
			r.LastError = fmt.Sprintf("attempt %d not completed by its CompleteBy", attempt)
		}
	})
	r := o.state.Recs[ref]
	if r.FailureCount >= a.MaxFailures || (!ref.Undo && o.state.State != workflow.Pending && o.state.State != workflow.Held) {
		o.fail(ref, workflow.TimedOut, true, r.LastError)
		return
	}
	o.state = o.state.After(o.state.GiveBack(ref, true))
	o.schedule(o.k.now.Add(workflow.RecoveryDelay(a.RetryBackoff, r.FailureCount)), true, func() { o.start(ref) })
}

// complete records ref done, with result, and what follows it.
func (o *Order) complete(ref workflow.Ref, result json.RawMessage) {
	if len(result) > 0 {
		o.results[ref] = result
	}
	o.rec[ref].armed = false
	o.apply(o.k.def.Complete(o.state, ref, o.k.now))
}

// fail records ref failed for good, and what follows it.
func (o *Order) fail(ref workflow.Ref, cause workflow.Cause, ran bool, reason string) {
	o.rec[ref].armed = false
	o.update(ref, func(r *workflow.Rec) { r.LastError = reason })
	o.apply(o.state.Fail(ref, cause, ran, o.k.now)) // its Cause, as the rules record it
}

// apply takes move m and starts what it made ready.
func (o *Order) apply(m workflow.Move) {
	o.state = o.state.After(m)
	for _, c := range m.Changes {
		if c.Ref.Undo && c.State == workflow.Processed {
			o.undone = append(o.undone, workflow.RecordName(o.state.Recs[c.Ref].Name, c.Ref))
		}
	}
	for _, ref := range append(slices.Clone(m.Ready), m.Resume...) {
		o.rec[ref].armed, o.rec[ref].admitting, o.rec[ref].slot = false, false, false
		o.ready(ref)
	}
	if m.State == workflow.Held {
		until := m.HeldUntil
		o.k.at(until, false, func() bool { return o.state.State == workflow.Held }, func() {
			if o.state.State == workflow.Held {
				if m, err := o.state.UndoHeld(); err == nil {
					o.apply(m)
				}
			}
		})
	}
	if o.state.State.Ended() && o.ended.IsZero() {
		o.ended = o.k.now
	}
}

// arm readies a wait: it completes with its event (kept already, or to
// come), or at its timeout fails (or, onTimeout: continue, goes on).
func (o *Order) arm(ref workflow.Ref) {
	w := o.k.def.Steps[ref.Index].Wait
	o.rec[ref].armed = true
	if data, ok := o.kept[w.Event]; ok {
		o.complete(ref, data)
		return
	}
	o.k.at(o.k.now.Add(w.Timeout), false, o.waiting(ref), func() {
		r := o.state.Recs[ref]
		if r.State != workflow.Pending || !o.rec[ref].armed || !o.state.Active(r) {
			return
		}
		if w.Continue {
			o.complete(ref, json.RawMessage("null"))
			return
		}
		o.fail(ref, workflow.TimedOut, false, fmt.Sprintf("no event %q by its timeout %s", w.Event, w.Timeout))
	})
}

// sleep readies a timer: it completes at its time.
func (o *Order) sleep(ref workflow.Ref) {
	doc, err := o.document(ref)
	var when time.Time
	if err == nil {
		when, err = o.k.def.Steps[ref.Index].Sleep.When(o.k.now, doc)
	}
	if err != nil {
		o.fail(ref, workflow.Refused, false, err.Error())
		return
	}
	o.rec[ref].armed = true
	o.k.at(when, true, o.waiting(ref), func() {
		if r := o.state.Recs[ref]; r.State == workflow.Pending && o.rec[ref].armed && o.state.Active(r) {
			o.complete(ref, nil)
		}
	})
}

// event takes an event for the order from sender.
func (o *Order) event(name string, data json.RawMessage, sender string) error {
	i, ok := o.k.def.WaitFor(name)
	if !ok {
		return fmt.Errorf("workflow %s waits for no event %q", o.k.def.Name, name)
	}
	if w := o.k.def.Steps[i].Wait; !w.Accepts(sender) {
		return fmt.Errorf("event %q for order %s: its sender %q is not one step %s takes it from (senders: %s; sastest.From sets it)",
			name, o.ID, sender, o.k.def.Steps[i].Name, strings.Join(w.Senders, ", "))
	}
	ref := workflow.Ref{Index: i}
	r := o.state.Recs[ref]
	switch {
	case o.state.State.Ended() || o.state.State == workflow.Compensating:
		return fmt.Errorf("order %s is %s: it waits for nothing", o.ID, o.state.State)
	case r.State != workflow.Pending:
		return fmt.Errorf("order %s no longer waits for %q: its step %s is %s", o.ID, name, r.Name, r.State)
	case o.kept[name] != nil:
		return fmt.Errorf("order %s already received event %q", o.ID, name)
	case o.rec[ref].armed && o.state.State == workflow.Pending:
		o.complete(ref, data)
	default: // its wait is not ready yet (or the order is held): kept for it
		o.kept[name] = data
	}
	return nil
}

// deadline is the order's deadline passing: what is at work fails for good
// (expired), and the order is undone.
func (o *Order) deadline() {
	for _, ref := range o.sortedRefs() {
		r := o.state.Recs[ref]
		if o.state.State != workflow.Pending || ref.Undo || !o.state.Active(r) {
			continue
		}
		o.fail(ref, workflow.Expired, r.State == workflow.Processing, "order deadline passed")
	}
}

func (o *Order) sortedRefs() []workflow.Ref {
	refs := make([]workflow.Ref, 0, len(o.state.Recs))
	for ref := range o.state.Recs {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b workflow.Ref) int {
		if a.Undo != b.Undo {
			if a.Undo {
				return 1
			}
			return -1
		}
		if a.Index != b.Index {
			return a.Index - b.Index
		}
		return a.Item - b.Item
	})
	return refs
}
