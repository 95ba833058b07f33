package statestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// An order whose workflow runs steps at once (Pl) is moved on by the
// workflow's rules over its records (workflow.Definition.Progress,
// workflow.Records.Compensate), not by a precomputed next step: what a
// completion makes ready depends on where the other branches stand. Each
// write is conditional on what those rules read (a sibling's progress, the
// order's state, or, off the happy path, its version) and, when a racing
// write changed it, is decided again on the order as that write left it
// (returned by the refused write itself: no read). Two branches ending at
// once are both recorded; the last to finish makes the join ready, or ends
// the order.

// parallelTries bounds the decide-write rounds of one outcome.
const parallelTries = 8

// finishParallel is Finish for an order whose steps run at once.
func (s *Store) finishParallel(ctx context.Context, c Completion) (Done, error) {
	var it *stateItem
	recs := c.Read
	if recs == nil || c.Ref.Undo {
		read, err := s.item(ctx, c.OrderID)
		if err != nil {
			return Done{}, err
		}
		it, recs = &read, read.records()
	}
	keepIndex := false
	for range parallelTries {
		var (
			d   Done
			err error
		)
		if it != nil && (c.Ref.Undo || it.CxBy != "" || it.State != string(workflow.Pending)) {
			d, err = s.windDown(ctx, c, *it)
		} else {
			d, err = s.progress(ctx, c, recs, keepIndex)
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return d, err
		}
		var old stateItem
		if ccf.Item == nil || attributevalue.UnmarshalMap(ccf.Item, &old) != nil || !c.isCurrent(old) {
			return Done{}, ErrStale // a stale or duplicate outcome: one write, refused
		}
		keepIndex = len(old.Unalerted) > 0 // an Error's alert is unconfirmed: an end keeps the order in the index
		it, recs = &old, old.records()
	}
	return Done{}, fmt.Errorf("complete %s/%s: the order changed each of the %d times it was decided; tried again",
		c.OrderID, sortKey(c.Ref), parallelTries)
}

// progress records a forward record's completion in an order running
// forward, and what the workflow's rules make of it.
func (s *Store) progress(ctx context.Context, c Completion, recs workflow.Records, keepIndex bool) (Done, error) {
	prog := c.Progress(recs)
	ch := newChange(c.Now)
	p := ch.rec("r", c.Ref)
	c.fence(ch, p)
	ch.cond = append(ch.cond, "attribute_not_exists(CxBy)")
	c.done(ch, p)
	for k, sd := range prog.Read {
		readAs(ch, k, sd, recs)
		if sd.Step == c.Ref.Index && c.Ref.Item > 0 { // its items finish one at a time: one more done
			ch.set = append(ch.set, fmt.Sprintf("P.#w%d = ", k)+ch.val("itemsDone", num(int64(sd.Done+1))))
		}
	}
	for k, r := range prog.Ready {
		s.makeReadyAs(ch, fmt.Sprintf("n%d", k), r, c.NextDueAt)
	}
	if prog.End {
		ch.task(workflow.Pending, workflow.Processed, "")
		if !keepIndex {
			ch.cond = append(ch.cond, "attribute_not_exists(Ua)")
			ch.remove = append(ch.remove, "DueShard", "DueAt")
		}
	} else {
		ch.cond = append(ch.cond, "St = "+ch.val("running", str(string(workflow.Pending))))
	}
	d, err := s.writeDone(ctx, c.OrderID, ch, fmt.Sprintf("complete %s/%s", c.OrderID, sortKey(c.Ref)), ms(c.NextDueAt))
	d.Ready = prog.Ready
	return d, err
}

// readAs adds the condition that step sd.Step has sd.Done records done still,
// as read: a single record's state, or a forEach step's count of its items.
func readAs(ch *change, k int, sd workflow.StepDone, recs workflow.Records) {
	single := workflow.Ref{Index: sd.Step}
	if _, ok := recs[single]; ok {
		p := ch.rec(fmt.Sprintf("w%d", k), single)
		op := "<>"
		if sd.Done > 0 {
			op = "="
		}
		ch.cond = append(ch.cond, fmt.Sprintf("%s.s %s %s", p, op, ch.val("processed", str(string(workflow.Processed)))))
		return
	}
	ch.names[fmt.Sprintf("#w%d", k)] = strconv.Itoa(sd.Step)
	if sd.Done == 0 {
		ch.cond = append(ch.cond, fmt.Sprintf("attribute_not_exists(P.#w%d)", k))
		return
	}
	ch.cond = append(ch.cond, fmt.Sprintf("P.#w%d = ", k)+ch.val(fmt.Sprintf("done%d", k), num(int64(sd.Done))))
}

// windDown records a record done while its order is undone (a sibling
// failed, or the order is being cancelled), or an undo action done, and what
// the undoing does next (workflow.Records.Compensate): stop what is ready,
// await what runs, undo the latest done, or end. It is conditional on the
// order's version as read.
func (s *Store) windDown(ctx context.Context, c Completion, it stateItem) (Done, error) {
	recs := it.records()
	r := recs[c.Ref]
	r.State, r.Ready, r.DoneAt = workflow.Processed, false, c.Now
	recs[c.Ref] = r
	ch := newChange(c.Now)
	p := ch.rec("r", c.Ref)
	c.fence(ch, p)
	ch.cond = append(ch.cond, "V = "+ch.val("version", num(int64(it.Version))))
	c.done(ch, p)
	if it.State == string(workflow.Pending) && it.CxBy == "" {
		return Done{}, fmt.Errorf("complete %s/%s: the order runs forward: not a record to wind down", c.OrderID, sortKey(c.Ref))
	}
	comp := recs.Compensate()
	d, err := s.compensate(ctx, ch, it, comp, c.Now, c.NextDueAt)
	if comp.Undo != nil {
		d.Ready = []workflow.Ref{*comp.Undo}
	}
	return d, err
}

// compensate adds to ch what the undoing does next and writes it.
func (s *Store) compensate(ctx context.Context, ch *change, it stateItem, comp workflow.Compensation, now, due time.Time) (Done, error) {
	from := workflow.State(it.State)
	s.stopAll(ch, comp.Stop, "not started: the order is being undone")
	switch {
	case comp.End == workflow.CompensationFailed:
		pivot := ch.rec("pv", comp.Pivot)
		ch.set = append(ch.set, pivot+".d = "+ch.val("alertDue", num(ms(now))),
			pivot+".e = "+ch.val("pivotWhy", str("it took effect and has no undo: the order cannot be undone")))
		ch.add = append(ch.add, "Ua "+ch.val("pivotSK", &types.AttributeValueMemberSS{Value: []string{sortKey(comp.Pivot)}}))
		ch.task(from, workflow.CompensationFailed, fmt.Sprintf("%s took effect and has no undo: the order cannot be undone",
			label(it.Recs[sortKey(comp.Pivot)].Name, comp.Pivot)))
		ch.index(it.OrderID, s.shards, now) // the Supervisor alerts it
	case comp.End != "":
		ch.task(from, comp.End, "")
		if len(it.Unalerted) == 0 {
			ch.cond = append(ch.cond, "attribute_not_exists(Ua)")
			ch.remove = append(ch.remove, "DueShard", "DueAt")
		}
	default:
		if from == workflow.Pending {
			ch.task(from, workflow.Compensating, "")
			ch.set = append(ch.set, "Dl = DlMs + "+ch.at()) // the undoing has as long as the order had
		}
		if comp.Undo != nil {
			s.makeReadyAs(ch, "un", *comp.Undo, due)
		}
	}
	return s.writeDone(ctx, it.OrderID, ch, "move on the undoing of "+it.OrderID, ms(due))
}

// stopAll adds to ch that the records stop: no longer ready (a request
// still in a queue runs nothing), each with why.
func (s *Store) stopAll(ch *change, refs []workflow.Ref, why string) {
	for k, r := range refs {
		p := ch.rec(fmt.Sprintf("x%d", k), r)
		ch.remove = append(ch.remove, p+".d")
		ch.incident(p, fmt.Sprintf("x%d", k), "%s", why)
	}
}

// makeReadyAs is makeReady with a record alias of its own, for a write that
// makes several records ready.
func (s *Store) makeReadyAs(ch *change, alias string, r workflow.Ref, due time.Time) {
	n := ch.rec(alias, r)
	ch.when("%[1]s.s = :pending AND attribute_not_exists(%[1]s.d)", n)
	ch.val("pending", str(string(workflow.Pending)))
	ch.set = append(ch.set, n+".d = "+ch.val("nextDue", num(ms(due))), n+".ra = "+ch.at())
}
