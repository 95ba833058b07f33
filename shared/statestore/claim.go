package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Claim is an Agent taking a ready record: the start of an attempt.
type Claim struct {
	OrderID string
	Ref     workflow.Ref
	Agent   string // the claiming agent: a record is claimed only by its own agent
	Owner   string // the claimant, kept in LockedBy
	// Token, for an async step, is the attempt's token nonce: its
	// service's callback must carry it.
	Token string
	// Version is the workflow version the request names: an order moved to
	// another since (sasctl migrate) is not claimed by it ("": any).
	Version string
	Now     time.Time
}

// Claim takes a ready Pending record for c.Owner: LockedBy = owner,
// Processing, Attempt + 1, CompleteBy = now + the action's timeout (also the
// record's deadline). The condition makes the claim exclusive, and takes a
// step's record only while the order runs forward, an undo action's only
// while it is undone (a step made ready before its order turned to be
// undone is stopped: nothing claims it). The time the record waited since it
// became ready (ReadyAt) was queue wait, never counted against it. It
// returns the claimed record (with Read, the order as the claim left it),
// ErrNotClaimable, or, for a ready record of another agent, ErrWrongAgent.
//
// The order's entry in the deadline index is not moved by a claim (an index
// write per step), unless it is later than the new CompleteBy: then it is
// pulled in, so a hung attempt is found at CompleteBy.
func (s *Store) Claim(ctx context.Context, c Claim) (Step, error) {
	ch := newChange(c.Now)
	r := ch.rec(c.Ref)
	ch.require(r, append(claimable(c), recIs("a", text(c.Agent)))...)
	ch.runs(c.Version)
	timeout := ch.field(r, "t")
	k := ch.field(r, "k")
	ch.b.Set(ch.field(r, "s"), ch.b.String(string(workflow.Processing)))
	ch.b.Set(ch.field(r, "lk"), ch.b.String(c.Owner))
	ch.b.Set(ch.field(r, "cb"), x.Plus(ch.at(), timeout))
	ch.b.Set(ch.field(r, "d"), x.Plus(ch.at(), timeout))
	ch.b.Set(k, x.Plus(x.IfNotExists(k, ch.b.Int(0)), ch.b.Int(1)))
	ch.b.Set(ch.field(r, "ca"), ch.at())
	ch.b.Set(ch.field(r, "cw"), ch.b.String(ch.id)) // this claim's own id (the change's write id), kept on its record
	if c.Token != "" {
		ch.b.Set(ch.field(r, "tk"), ch.b.String(c.Token))
	}
	ch.drop(r, "ac", "hk", "hy") // an earlier attempt's acceptance, its slot, and what it waited for
	in, err := s.fieldsInput(ch, c.OrderID)
	if err != nil {
		return Step{}, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := s.updateItem(ctx, ch, in)
	var ccf *types.ConditionalCheckFailedException
	var unknown *UnknownOutcome
	if errors.As(err, &unknown) {
		if own := claimedBy(unknown.Item, c, ch.id); own != nil {
			out, err = own, nil // applied, its answer lost, and another write landed since
		}
	} else if errors.As(err, &ccf) {
		if own := claimedBy(ccf.Item, c, ch.id); own != nil {
			out, err = own, nil // its earlier try, applied: its answer was lost, and another write landed since
		} else {
			return Step{}, notClaimable(ccf.Item, c)
		}
	}
	if err != nil {
		return Step{}, fmt.Errorf("claim %s/%s: %w", c.OrderID, sortKey(c.Ref), err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Step{}, fmt.Errorf("decode claimed %s/%s: %w", c.OrderID, sortKey(c.Ref), err)
	}
	st := it.step(sortKey(c.Ref), it.view())
	if err := s.pullIn(ctx, it, ms(st.CompleteBy)); err != nil {
		return st, &LateLook{Err: err}
	}
	return st, nil
}

// LateLook is a claim made whose order's deadline index entry could not be
// pulled in to its CompleteBy: the claim holds, and a hung attempt is found
// at the entry's time, later (as after a crash between the two writes).
type LateLook struct{ Err error }

func (e *LateLook) Error() string {
	return "claimed, its deadline index entry not pulled in (a hung attempt is found later): " + e.Err.Error()
}

// Unwrap is the index write's error.
func (e *LateLook) Unwrap() error { return e.Err }

// ErrWrongAgent means the record is ready but belongs to another agent: the
// request was routed to the wrong queue.
var ErrWrongAgent = errors.New("record belongs to another agent")

// claimedBy is the item as it was, if its record is this very claim's,
// applied by an earlier try whose answer was lost (the SDK sent it again):
// the record is at work and keeps this claim's own id. The item's write id
// says so only while no other write of the order landed since; the
// record's says so whatever came after. (Its owner and time would not: a
// request delivered twice is claimed by the same instance in the same
// millisecond, and the explorer saw the second run the first's attempt.)
func claimedBy(old map[string]types.AttributeValue, c Claim, id string) *dynamodb.UpdateItemOutput {
	var it stateItem
	if old == nil || attributevalue.UnmarshalMap(old, &it) != nil {
		return nil
	}
	r, ok := it.Recs[sortKey(c.Ref)]
	if !ok || r.State != string(workflow.Processing) || r.ClaimWrite != id {
		return nil
	}
	return &dynamodb.UpdateItemOutput{Attributes: old}
}

// claimable are the checks that make a record c's to claim, but its agent's:
// ready (Pending, due), not claimed, in an order that runs it now.
func claimable(c Claim) []check {
	return []check{recState(workflow.Pending), recLacks("lk"), recHas("d"), orderIs(taskFrom(c.Ref))}
}

// notClaimable says why a claim was refused, from the record as it was.
func notClaimable(old map[string]types.AttributeValue, c Claim) error {
	var it stateItem
	if old == nil || attributevalue.UnmarshalMap(old, &it) != nil {
		return ErrNotClaimable
	}
	r, ok := it.Recs[sortKey(c.Ref)]
	if c.Version != "" && it.WfVersion != c.Version {
		return ErrNotClaimable // the order moved to another version: its request was sent again
	}
	if ok && r.Agent != c.Agent && allHold(claimable(c), it, r) {
		return fmt.Errorf("%s/%s is %q's (%s), not %q's: %w", c.OrderID, sortKey(c.Ref), r.Agent, r.Name, c.Agent, ErrWrongAgent)
	}
	return ErrNotClaimable
}

// Abandon ends an async attempt early, for its own Agent: its service never
// accepted the call before the Agent's time ran out, so no callback will
// come, and the attempt would otherwise hold the step until its CompleteBy
// (for an async step, the whole wait: hours). Fenced by the attempt and its
// token's nonce, it moves CompleteBy to now and pulls the order's look in:
// the Supervisor recovers the attempt at its next sweep, by the usual rules
// (retried after a backoff, or at the threshold failed for good).
func (s *Store) Abandon(ctx context.Context, st Step, reason string, now time.Time) error {
	ch := newChange(now)
	r := ch.rec(st.Ref)
	Fence{Ref: st.Ref, Attempt: st.Attempt, Round: st.Round, Token: st.Token}.condition(ch)
	ch.require(r, recState(workflow.Processing))
	ch.put(r, "cb", num(ms(now)))
	ch.put(r, "d", num(ms(now)))
	if st.FailureCount < MaxIncidents {
		ch.incident(r, "attempt %d abandoned by its agent: %s", st.Attempt, clip(reason, MaxIncidentBytes))
	}
	in, err := s.fieldsInput(ch, st.OrderID)
	if err != nil {
		return err
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.updateItem(ctx, ch, in)
	if isConditionFailed(err) {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("abandon %s: %w", st.Key(), err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return fmt.Errorf("decode %s: %w", st.OrderID, err)
	}
	return s.pullIn(ctx, it, ms(now))
}

// Accept notes, for its own Agent, that an async attempt's service accepted
// the call: the Agent is done with it and only its callback can end it, so
// a cancel need not await it (workflow.Rec.Accepted). Fenced by the attempt
// and its token's nonce; ErrStale if it no longer holds. st.Slot, if set, is
// the key whose slot the attempt holds, for its callback to let go.
func (s *Store) Accept(ctx context.Context, st Step, now time.Time) error {
	ch := newChange(now)
	r := ch.rec(st.Ref)
	Fence{Ref: st.Ref, Attempt: st.Attempt, Round: st.Round, Token: st.Token}.condition(ch)
	ch.require(r, recState(workflow.Processing))
	ch.put(r, "ac", num(ms(now)))
	if st.Slot != "" {
		ch.put(r, "hk", str(st.Slot))
	}
	return s.update(ctx, st.OrderID, ch, "accept "+st.Key())
}

// update runs the change; a failed condition is ErrStale.
func (s *Store) update(ctx context.Context, orderID string, ch *change, what string) error {
	in, err := s.fieldsInput(ch, orderID)
	if err != nil {
		return err
	}
	_, err = s.updateItem(ctx, ch, in)
	if isConditionFailed(err) {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// pullIn moves the order's index entry earlier, to due, if it (as the write
// just made returned it) is later: the Supervisor moves an entry on to the
// next deadline it knows of, and a claim or a completion may then set an
// earlier one. It does not bump the Version: it only moves a look earlier,
// and a Supervisor that read the order before writes on what it read.
// Losing this write (a crash) only delays the Supervisor's look.
func (s *Store) pullIn(ctx context.Context, it stateItem, due int64) error {
	if it.DueAt == 0 || it.DueAt <= due || due == 0 {
		return nil
	}
	b := x.New()
	at := b.Plain(topology.KeyDueAt)
	b.Set(at, b.Int(due))
	b.If(x.Greater(at, b.Int(due)))
	in, err := b.UpdateInput(s.state, key(it.OrderID, taskSK))
	if err == nil {
		_, err = s.db.UpdateItem(ctx, in)
	}
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("pull in the index entry of %s: %w", it.OrderID, err)
	}
	return nil
}
