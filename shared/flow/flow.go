// Package flow is an agent's rate gate: it protects the agent's service
// across every instance of its Agent with a call rate
// (workflow.Agent.RateLimit), the back-off its service asked for (a 429 or
// 503 with Retry-After), and a pause an operator sets for a provider's
// maintenance. It has no server of its own: each is a small item of the
// state table beside the orders, in the agent's partition
// (topology.AgentPartition), read and written with conditional and atomic
// updates. (The calls in flight per key are shared/keyline's, and the
// keys' names shared/keyname's.)
//
// An Agent asks Admit before it claims a record: a call not admitted waits
// (its request comes back later), which is never a failure. A rate limit's
// turns are kept exactly and taken in leases of several a write
// (schedule.go says why no window of its period then holds more calls than
// it allows, turns.go how an instance hands them out).
package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// DB is the part of the DynamoDB client flow uses.
type DB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Control is an agent's flow state an operator or its service set.
type Control struct {
	Agent    string
	Paused   bool
	PausedBy string
	PausedAt time.Time
	// SlowUntil: its service asked for no calls before then (Retry-After).
	SlowUntil time.Time
}

// How long a call waits when its agent is paused: resuming takes effect
// within it.
const PausedWait = 30 * time.Second

// ControlTTL is how long an Agent instance trusts the control it read: a
// pause or a back-off reaches every instance within it, for a strongly
// consistent read an instance at most every ControlTTL (a read per call
// would slow every call on a loaded table).
const ControlTTL = time.Second

// MaxStale is the oldest control an instance answers from while it reads
// it afresh in the background; an older one is read before answering.
const MaxStale = 3 * ControlTTL

// Store reads and writes the agents' flow items in the state table.
type Store struct {
	db    DB
	table string
}

// NewStore is the flow items of the state table.
func NewStore(db DB, stateTable string) Store { return Store{db: db, table: stateTable} }

// Usable reports whether s has a table to read (a zero Store has none).
func (s Store) Usable() bool { return s.db != nil && s.table != "" }

func agentKey(agent, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		topology.KeyOrderID: &types.AttributeValueMemberS{Value: topology.AgentPartition(agent)},
		topology.KeySort:    &types.AttributeValueMemberS{Value: sk},
	}
}

// controlItem is the control item as stored.
type controlItem struct {
	Paused    bool   `dynamodbav:"Paused,omitempty"`
	PausedBy  string `dynamodbav:"PausedBy,omitempty"`
	PausedAt  int64  `dynamodbav:"PausedAt,omitempty"`
	SlowUntil int64  `dynamodbav:"SlowUntil,omitempty"`
}

// Control reads agent's control (strongly consistent: a pause read after
// it was set is seen).
func (s Store) Control(ctx context.Context, agent string) (Control, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: agentKey(agent, "control"),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Control{}, fmt.Errorf("read agent %s's flow control: %w", agent, err)
	}
	var it controlItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return Control{}, fmt.Errorf("decode agent %s's flow control: %w", agent, err)
	}
	c := Control{Agent: agent, Paused: it.Paused, PausedBy: it.PausedBy}
	if it.PausedAt != 0 {
		c.PausedAt = time.UnixMilli(it.PausedAt).UTC()
	}
	if it.SlowUntil != 0 {
		c.SlowUntil = time.UnixMilli(it.SlowUntil).UTC()
	}
	return c, nil
}

// Pause stops agent's calls from now: its requests wait (none fails) until
// Resume. It reports whether it was running (false: paused already).
func (s Store) Pause(ctx context.Context, agent, by string, now time.Time) (bool, error) {
	b := dynamoexpr.New()
	paused := b.Plain("Paused")
	b.Set(paused, b.Bool(true))
	b.Set(b.Plain("PausedBy"), b.String(by))
	b.Set(b.Plain("PausedAt"), b.Int(now.UnixMilli()))
	b.If(dynamoexpr.Or(dynamoexpr.NotExists(paused), dynamoexpr.Equal(paused, b.Bool(false))))
	changed, err := s.updateControl(ctx, agent, b)
	if err != nil {
		return false, fmt.Errorf("pause agent %s: %w", agent, err)
	}
	return changed, nil
}

// Resume lets agent's calls go on. It reports whether it was paused.
func (s Store) Resume(ctx context.Context, agent string) (bool, error) {
	b := dynamoexpr.New()
	paused := b.Plain("Paused")
	b.Set(paused, b.Bool(false))
	b.Remove(b.Plain("PausedBy"))
	b.Remove(b.Plain("PausedAt"))
	b.If(dynamoexpr.Equal(paused, b.Bool(true)))
	changed, err := s.updateControl(ctx, agent, b)
	if err != nil {
		return false, fmt.Errorf("resume agent %s: %w", agent, err)
	}
	return changed, nil
}

// SlowDown asks every instance of agent for no call before until (a
// Retry-After its service answered); a later until extends it, an earlier
// one changes nothing.
func (s Store) SlowDown(ctx context.Context, agent string, until time.Time) error {
	b := dynamoexpr.New()
	slow, u := b.Plain("SlowUntil"), b.Int(until.UnixMilli())
	b.Set(slow, u)
	b.If(dynamoexpr.Or(dynamoexpr.NotExists(slow), dynamoexpr.Less(slow, u)))
	if _, err := s.updateControl(ctx, agent, b); err != nil {
		return fmt.Errorf("slow agent %s down: %w", agent, err)
	}
	return nil
}

// updateControl makes b on agent's control item: whether it did (false:
// its condition did not hold).
func (s Store) updateControl(ctx context.Context, agent string, b *dynamoexpr.Builder) (bool, error) {
	in, err := b.UpdateInput(s.table, agentKey(agent, "control"))
	if err != nil {
		return false, err
	}
	_, err = s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	return err == nil, err
}

// Take decides, at the moment of a call, whether agent may call its service
// now at a rate of limit: a generic cell rate algorithm (GCRA, as redis-cell
// and most API gateways keep it) over the agent's schedule (schedule: its
// theoretical arrival time T, kept exactly). A call may go now if T is at
// most a burst's tolerance past now, and it moves T on to max(T, now) + one
// interval. A call that may not go books nothing: Take says when the next
// may (next), and the caller asks again then. It is a lease of one turn due
// now (Gate.Turn takes leases of several).
func (s Store) Take(ctx context.Context, agent string, limit workflow.Rate, now time.Time) (ok bool, next time.Time, err error) {
	var known schedule
	l, next, _, err := s.lease(ctx, agent, limit, 1, now, 0, &known)
	return l.Turns > 0, next, err
}

// maxTries is how many writes a lease tries while it loses races to other
// instances, each decided again on what the lost write returned.
const maxTries = 8

// lease takes up to turns consecutive turns of agent's rate limit in one
// conditional write, its first due no later than ahead past now: the
// lease, or none and when the first may go (next), and the writes it
// took (none when known says the turns are not due yet). known is the schedule
// as the caller last knew it (the zero schedule: not known), updated to
// what this call wrote or read: a write on a known schedule is conditional
// on it exactly; an idle schedule not known is written on the condition
// that its TAT is not past the new run's start. A race lost to another
// instance is decided again on the item the failed write returns
// (ReturnValuesOnConditionCheckFailure), never an error.
func (s Store) lease(ctx context.Context, agent string, limit workflow.Rate, turns int, now time.Time, ahead time.Duration,
	known *schedule) (Lease, time.Time, int, error) {
	key := agentKey(agent, "rate")
	var ccf *types.ConditionalCheckFailedException
	for try := range maxTries {
		p := known.take(limit, turns, now.UnixNano(), int64(ahead))
		if p.lease.Turns == 0 {
			return Lease{}, time.Unix(0, p.next).In(now.Location()), try, nil
		}
		in, err := p.update(*known, try > 0, limit).UpdateInput(s.table, key)
		if err != nil {
			return Lease{}, time.Time{}, try, fmt.Errorf("take turns of agent %s: %w", agent, err)
		}
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		_, err = s.db.UpdateItem(ctx, in)
		if err == nil {
			*known = p.after
			return p.lease, now, try + 1, nil
		}
		if !errors.As(err, &ccf) {
			return Lease{}, time.Time{}, try + 1, fmt.Errorf("take turns of agent %s: %w", agent, err)
		}
		if *known, _, err = decodeSchedule(ccf.Item); err != nil {
			return Lease{}, time.Time{}, try + 1, fmt.Errorf("decode agent %s's schedule: %w", agent, err)
		}
	}
	// Lost every race: others took the turns meanwhile; try an interval on.
	return Lease{}, now.Add(limit.Span(1)), maxTries, nil
}

// Booked is the theoretical arrival time of agent's rate limit (zero: no
// call took a turn yet): while it is ahead of now by more than the burst's
// tolerance, calls wait for their turn; and the limit as the calls last
// took it ("" if none did). It reads the schedule an earlier version kept
// (NextAt, in milliseconds) too.
func (s Store) Booked(ctx context.Context, agent string) (time.Time, string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: agentKey(agent, "rate")})
	if err != nil {
		return time.Time{}, "", fmt.Errorf("read agent %s's schedule: %w", agent, err)
	}
	sch, limit, err := decodeSchedule(out.Item)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("decode agent %s's schedule: %w", agent, err)
	}
	if !sch.exists || sch.tat() == 0 {
		return time.Time{}, "", nil
	}
	return time.Unix(0, sch.tat()).UTC(), limit, nil
}
