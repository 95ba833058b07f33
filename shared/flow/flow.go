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

// Usable reports whether s has a table to read (a zero Store has none).
func (s Store) Usable() bool { return s.db != nil && s.table != "" }

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

// Take decides, at the moment of a call, whether agent may call its service
// now at a rate of limit: a generic cell rate algorithm (GCRA, as redis-cell
// and most API gateways keep it). The agent's schedule is one item holding
// its theoretical arrival time T (NextAt): a call may go now if T is at most
// a burst's tolerance, (Burst-1) intervals, past now, and it moves T on to
// max(T, now) + one interval. A call that may not go books nothing: Take
// says when the next may (next), and the caller asks again then. No future
// turn is ever reserved, so none is left unused when a delayed call comes
// back late: with a backlog the service sees the whole rate.
//
// One conditional write a call while calls queue up or the schedule is
// idle; a race lost to another instance is decided again on the T that
// write returns, never an error.
func (s Store) Take(ctx context.Context, agent string, limit workflow.Rate, now time.Time) (ok bool, next time.Time, err error) {
	interval := limit.Interval().Milliseconds()
	tolerance := int64(max(limit.Burst-1, 0)) * interval
	key := agentKey(agent, "rate")
	nowMs := now.UnixMilli()
	n := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	var ccf *types.ConditionalCheckFailedException
	tat, known := int64(0), false
	for try := 0; try < 8; try++ {
		var in *dynamodb.UpdateItemInput
		switch {
		case known && tat > nowMs+tolerance:
			return false, time.UnixMilli(tat - tolerance).In(now.Location()), nil
		case known && tat >= nowMs:
			// Calls queue up: this one is within the tolerance.
			in = &dynamodb.UpdateItemInput{TableName: &s.table, Key: key,
				UpdateExpression:          aws.String("SET NextAt = NextAt + :i"),
				ConditionExpression:       aws.String("NextAt = :tat"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":i": n(interval), ":tat": n(tat)}}
		default:
			// The schedule is idle (or not read yet): the call is now. The
			// limit is kept beside it, for an operator's view.
			in = &dynamodb.UpdateItemInput{TableName: &s.table, Key: key,
				UpdateExpression:    aws.String("SET NextAt = :next, RateLimit = :limit"),
				ConditionExpression: aws.String("attribute_not_exists(NextAt) OR NextAt < :now"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":now": n(nowMs), ":next": n(nowMs + interval),
					":limit": &types.AttributeValueMemberS{Value: limit.String()}}}
		}
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		_, err := s.db.UpdateItem(ctx, in)
		if err == nil {
			return true, now, nil
		}
		if !errors.As(err, &ccf) {
			return false, time.Time{}, fmt.Errorf("take a turn of agent %s: %w", agent, err)
		}
		var it struct {
			NextAt int64 `dynamodbav:"NextAt"`
		}
		if err := attributevalue.UnmarshalMap(ccf.Item, &it); err != nil {
			return false, time.Time{}, fmt.Errorf("decode agent %s's schedule: %w", agent, err)
		}
		tat, known = it.NextAt, true
	}
	// Lost every race: others took the turns meanwhile; try an interval on.
	return false, now.Add(limit.Interval()), nil
}

// Booked is the theoretical arrival time of agent's rate limit (zero: no
// call took a turn yet): while it is ahead of now by more than the burst's
// tolerance, calls wait for their turn; and the limit as the calls last
// took it ("" if none did).
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
	// why). Otherwise the call may be made now, and Turned says it took a
	// turn of its rate limit.
	Wait   time.Duration
	Why    string
	Turned bool
}

// Gate is one Agent instance's view of its flow items: the control cached
// for ControlTTL; and its calls' turns of the rate limit, asked for one at
// a time (the instance's calls wait in line for it, so that only one of
// them at a time races the other instances).
type Gate struct {
	Store      Store
	mu         sync.Mutex
	read       time.Time
	last       Control
	refreshing bool
	reading    sync.Mutex    // one read of the control at a time that calls wait for (control)
	line       chan struct{} // one call of this instance at a time asks for a turn (enterLine)
	lineOnce   sync.Once
	// Sleep waits for a turn (nil: a timer; tests replace it).
	Sleep func(ctx context.Context, d time.Duration) error
	// Background runs a refresh of the cached control (nil: in a goroutine
	// of its own; a deterministic test runs it in the call that started it).
	Background func(refresh func())
}

// MaxTurnWait is how long a call at the head of its Agent instance's line
// waits for a turn of its rate limit before its request is sent again for
// later (never past its invocation's time): long enough that the instances'
// calls take every turn of a backlog between them, so few requests go round
// the queue again.
const MaxTurnWait = 3 * time.Second

// Admit says whether agent may call its service now, at most limit calls a
// period (zero: no limit). A pause or a back-off makes the call wait; a rate
// limit gives the call a turn (Store.Take), waiting for it in the Agent up
// to MaxTurnWait (never past by, if set), or else a Wait for the request to
// come back.
func (g *Gate) Admit(ctx context.Context, agent string, limit workflow.Rate, by, now time.Time) (Verdict, error) {
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
		return Verdict{}, nil
	}
	return g.Turn(ctx, agent, limit, by, now)
}

// Turn waits in line for a turn of agent's rate limit, up to MaxTurnWait
// (and never past by, if set), from now: Turned, or a Wait for the request
// to come back when the turn is further off.
func (g *Gate) Turn(ctx context.Context, agent string, limit workflow.Rate, by, now time.Time) (Verdict, error) {
	why := fmt.Sprintf("waiting for its rate turn (agent %s, %s)", agent, limit)
	queued := time.Now()
	if !g.enterLine(ctx, by, now) {
		return Verdict{Wait: time.Second, Why: why}, nil // its time ran out in line
	}
	defer g.leaveLine()
	now = now.Add(time.Since(queued)) // as long as it waited in line
	until := now.Add(MaxTurnWait)     // from its place at the head of the line
	if !by.IsZero() && by.Before(until) {
		until = by
	}
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(until) {
		until = d.Add(-time.Second) // its invocation's time: the request is sent again before it ends
	}
	for {
		ok, next, err := g.Store.Take(ctx, agent, limit, now)
		if err != nil {
			return Verdict{}, err
		}
		if ok {
			return Verdict{Turned: true}, nil
		}
		if next.After(until) {
			return Verdict{Wait: max(next.Sub(now), time.Second), Why: why}, nil
		}
		if err := g.sleep(ctx, next.Sub(now)); err != nil {
			return Verdict{}, err
		}
		now = next
	}
}

// enterLine waits for the head of the instance's line, no later than by
// (zero: no bound; by is on the clock of now) or ctx's end; it reports
// whether it got there.
func (g *Gate) enterLine(ctx context.Context, by, now time.Time) bool {
	g.lineOnce.Do(func() { g.line = make(chan struct{}, 1) })
	var timeout <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(by.Sub(now))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case g.line <- struct{}{}:
		return true
	case <-timeout:
		return false
	case <-ctx.Done():
		return false
	}
}

func (g *Gate) leaveLine() { <-g.line }

func (g *Gate) sleep(ctx context.Context, d time.Duration) error {
	if g.Sleep != nil {
		return g.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

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
// call of a busy instance waits on it. The calls of a batch start at once:
// one of them reads, the others wait for its read (begun at most a read's
// time before they asked) rather than each making its own (ten consistent
// reads an idle batch, as sasctl bench counted).
func (g *Gate) control(ctx context.Context, agent string, now time.Time) (Control, error) {
	if c, ok := g.fresh(agent, now); ok {
		return c, nil
	}
	g.reading.Lock()
	defer g.reading.Unlock()
	if c, ok := g.fresh(agent, now); ok { // read while this call waited
		return c, nil
	}
	c, err := g.Store.Control(ctx, agent)
	if err != nil {
		return c, err
	}
	g.mu.Lock()
	g.read, g.last = now, c
	g.mu.Unlock()
	return c, nil
}

// fresh is agent's control from the cache, if it was read within MaxStale
// of now, refreshed in the background (Background) past ControlTTL.
func (g *Gate) fresh(agent string, now time.Time) (Control, bool) {
	c, ok, stale := g.cached(agent, now)
	if stale {
		if g.Background != nil {
			g.Background(func() { g.refresh(agent, now) })
		} else {
			go g.refresh(agent, now)
		}
	}
	return c, ok
}

// cached is agent's control from the cache, if it was read within MaxStale
// of now, and whether this call is to refresh it (past ControlTTL, no
// refresh under way).
func (g *Gate) cached(agent string, now time.Time) (c Control, ok, stale bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.read.IsZero() || g.last.Agent != agent || now.Sub(g.read) >= MaxStale {
		return Control{}, false, false
	}
	if now.Sub(g.read) >= ControlTTL && !g.refreshing {
		g.refreshing = true
		stale = true
	}
	return g.last, true, stale
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
