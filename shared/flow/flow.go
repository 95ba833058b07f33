// Package flow protects an agent's service across every instance of its
// Agent: a call rate (workflow.Agent.RateLimit), the back-off its service
// asked for (a 429 or 503 with Retry-After), and a pause an operator sets for
// a provider's maintenance. It has no server of its own: each is a small
// item of the state table beside the orders (its key's OrderID starts with
// "~agent/", which no order id can), read and written with conditional and
// atomic updates.
//
// An Agent asks Admit before it claims a record: a call not admitted waits
// (its request comes back later), which is never a failure.
package flow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// DB is the part of the DynamoDB client flow uses.
type DB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
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

func agentKey(agent, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		topology.KeyOrderID: &types.AttributeValueMemberS{Value: "~agent/" + agent},
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
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: agentKey(agent, "control"),
		UpdateExpression:    aws.String("SET Paused = :t, PausedBy = :by, PausedAt = :at"),
		ConditionExpression: aws.String("attribute_not_exists(Paused) OR Paused = :f"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true},
			":f": &types.AttributeValueMemberBOOL{Value: false}, ":by": &types.AttributeValueMemberS{Value: by},
			":at": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)}}})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pause agent %s: %w", agent, err)
	}
	return true, nil
}

// Resume lets agent's calls go on. It reports whether it was paused.
func (s Store) Resume(ctx context.Context, agent string) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: agentKey(agent, "control"),
		UpdateExpression:          aws.String("SET Paused = :f REMOVE PausedBy, PausedAt"),
		ConditionExpression:       aws.String("Paused = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}, ":f": &types.AttributeValueMemberBOOL{Value: false}}})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resume agent %s: %w", agent, err)
	}
	return true, nil
}

// SlowDown asks every instance of agent for no call before until (a
// Retry-After its service answered); a later until extends it, an earlier
// one changes nothing.
func (s Store) SlowDown(ctx context.Context, agent string, until time.Time) error {
	v := &types.AttributeValueMemberN{Value: strconv.FormatInt(until.UnixMilli(), 10)}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: agentKey(agent, "control"),
		UpdateExpression:          aws.String("SET SlowUntil = :u"),
		ConditionExpression:       aws.String("attribute_not_exists(SlowUntil) OR SlowUntil < :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": v}})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("slow agent %s down: %w", agent, err)
	}
	return nil
}

// Turn takes the next call of agent at a rate of limit: the time it may be
// made, now or later, each call interval (limit.Per / limit.Calls) after
// the one before it whatever instance took it. The agent's schedule is one
// item: a call moves its next free time on by the interval, with one write
// while calls queue up, two when the schedule had fallen behind now.
//
// With a burst of B, the schedule may lag up to B-1 intervals behind now:
// after a quiet spell, B calls take turns at once (their times in the
// past: no wait), then the next waits an interval.
func (s Store) Turn(ctx context.Context, agent string, limit workflow.Rate, now time.Time) (time.Time, error) {
	interval := limit.Interval().Milliseconds()
	key := agentKey(agent, "rate")
	floor := now.UnixMilli() - int64(max(limit.Burst-1, 0))*interval // the earliest a turn may be
	nowV := &types.AttributeValueMemberN{Value: strconv.FormatInt(floor, 10)}
	for range 3 {
		// Calls queue up: the next free time is ahead of the floor (now,
		// less a burst's lag).
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: key,
			UpdateExpression: aws.String("SET NextAt = NextAt + :i"), ConditionExpression: aws.String("NextAt > :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": nowV,
				":i": &types.AttributeValueMemberN{Value: strconv.FormatInt(interval, 10)}},
			ReturnValues: types.ReturnValueUpdatedNew})
		var ccf *types.ConditionalCheckFailedException
		if err == nil {
			var next int64
			if err := attributevalue.Unmarshal(out.Attributes["NextAt"], &next); err != nil {
				return time.Time{}, fmt.Errorf("decode agent %s's schedule: %w", agent, err)
			}
			return time.UnixMilli(next - interval).In(now.Location()), nil // in a burst: up to Burst-1 intervals ago
		}
		if !errors.As(err, &ccf) {
			return time.Time{}, fmt.Errorf("take a turn of agent %s: %w", agent, err)
		}
		// The schedule fell behind (more than a burst): this call is now, and
		// the schedule restarts a burst's lag behind it (unless another call
		// took a turn meanwhile). The limit is kept beside the schedule, for
		// an operator's view.
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: key,
			UpdateExpression:    aws.String("SET NextAt = :next, RateLimit = :limit"),
			ConditionExpression: aws.String("attribute_not_exists(NextAt) OR NextAt <= :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": nowV,
				":next":  &types.AttributeValueMemberN{Value: strconv.FormatInt(floor+interval, 10)},
				":limit": &types.AttributeValueMemberS{Value: limit.String()}}})
		if err == nil {
			return now, nil
		}
		if !errors.As(err, &ccf) {
			return time.Time{}, fmt.Errorf("take a turn of agent %s: %w", agent, err)
		}
	}
	return time.Time{}, fmt.Errorf("take a turn of agent %s: its schedule changed under each of 3 tries", agent)
}

// Booked is the next free turn of agent's rate limit (zero: none taken
// yet): past now, calls wait for turns booked up to then; and the limit as
// the calls last took it ("" if none did).
func (s Store) Booked(ctx context.Context, agent string) (time.Time, string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: agentKey(agent, "rate")})
	if err != nil {
		return time.Time{}, "", fmt.Errorf("read agent %s's schedule: %w", agent, err)
	}
	var it struct {
		NextAt    int64  `dynamodbav:"NextAt"`
		RateLimit string `dynamodbav:"RateLimit"`
	}
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil || it.NextAt == 0 {
		return time.Time{}, "", err
	}
	return time.UnixMilli(it.NextAt).UTC(), it.RateLimit, nil
}

// Verdict is what Admit decided for one call.
type Verdict struct {
	// Wait > 0: not now: the request comes back after Wait (Why says
	// why); At, if set, is the turn its rate limit gave it. Otherwise the
	// call is made at At (a rate limit's turn, within MaxTurnSleep).
	Wait time.Duration
	Why  string
	At   time.Time
}

// Gate is one Agent instance's view of its flow items: the control cached
// for ControlTTL.
type Gate struct {
	Store      Store
	mu         sync.Mutex
	read       time.Time
	last       Control
	refreshing bool
}

// Admit says whether agent may call its service now, at most limit calls a
// period (zero: no limit). A pause or a back-off makes the call wait; a rate
// limit gives the call its turn (Store.Turn): At, if it is near, or else a
// Wait until it (At set: the request carries its turn, and takes no other).
//
// A call that has its turn already (turn, from its request) takes no other.
func (g *Gate) Admit(ctx context.Context, agent string, limit workflow.Rate, turn, now time.Time) (Verdict, error) {
	c, err := g.control(ctx, agent, now)
	if err != nil {
		return Verdict{}, err
	}
	switch {
	case c.Paused:
		return Verdict{Wait: PausedWait, Why: fmt.Sprintf("agent %s is paused (by %s)", agent, c.PausedBy)}, nil
	case c.SlowUntil.After(now):
		jitter := time.Duration(rand.Int64N(int64(time.Second)))
		return Verdict{Wait: c.SlowUntil.Sub(now) + jitter, Why: fmt.Sprintf("agent %s's service asked for no calls before %s",
			agent, c.SlowUntil.UTC().Format(time.RFC3339))}, nil
	case limit.Calls == 0:
		return Verdict{At: now}, nil
	}
	at := turn
	if at.IsZero() {
		if at, err = g.Store.Turn(ctx, agent, limit, now); err != nil {
			return Verdict{}, err
		}
	}
	if wait := at.Sub(now); wait > MaxTurnSleep {
		return Verdict{Wait: wait, At: at, Why: fmt.Sprintf("agent %s's rate limit (%s): its turn is at %s", agent, limit,
			at.UTC().Format(time.RFC3339Nano))}, nil
	}
	return Verdict{At: at}, nil
}

// MaxTurnSleep is how long a call waits for its turn in its Agent; a later
// turn has its request sent again, delayed, carrying the turn.
const MaxTurnSleep = time.Second

// Recheck is Admit's pause and back-off again (read afresh if the cached
// control is older than ControlTTL): a claimed call checks them right before
// it is made, so that a 429 another instance met while it waited for its
// claim or its turn holds it too.
func (g *Gate) Recheck(ctx context.Context, agent string, now time.Time) (Verdict, error) {
	return g.Admit(ctx, agent, workflow.Rate{}, time.Time{}, now)
}

// Forget drops the cached control: the next Admit reads it (after this
// instance slowed its agent down, say).
func (g *Gate) Forget() {
	g.mu.Lock()
	g.read = time.Time{}
	g.mu.Unlock()
}

// control is agent's control as this instance knows it. Read
// synchronously at first and after an idle spell (a read older than
// MaxStale: a call that comes back after its 30 s pause must not be told
// the pause it waited out); in between, a read older than ControlTTL is
// refreshed in the background while the cached one answers, so that no
// call of a busy instance waits on it.
func (g *Gate) control(ctx context.Context, agent string, now time.Time) (Control, error) {
	g.mu.Lock()
	if !g.read.IsZero() && g.last.Agent == agent && now.Sub(g.read) < MaxStale {
		c := g.last
		if now.Sub(g.read) >= ControlTTL && !g.refreshing {
			g.refreshing = true
			go g.refresh(agent, now)
		}
		g.mu.Unlock()
		return c, nil
	}
	g.mu.Unlock()
	c, err := g.Store.Control(ctx, agent)
	if err != nil {
		return c, err
	}
	g.mu.Lock()
	g.read, g.last = now, c
	g.mu.Unlock()
	return c, nil
}

// refresh reads agent's control for the cache.
func (g *Gate) refresh(agent string, now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.Store.Control(ctx, agent)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshing = false
	if err == nil {
		g.read, g.last = now, c
	}
}
