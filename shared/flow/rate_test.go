package flow_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/workflow"
)

// virtualGate is an instance whose time passes only by its sleeps (a
// test's clock).
func virtualGate(s flow.Store) *flow.Gate {
	return &flow.Gate{Store: s, Sleep: func(context.Context, time.Duration) error { return nil }}
}

// takeUntil takes turns of limit at the moment each is told to be (now,
// then each next), until n turns went: their moments.
func takeUntil(t *testing.T, s flow.Store, agent string, limit workflow.Rate, n int) []time.Time {
	t.Helper()
	var went []time.Time
	for now := t0; len(went) < n; {
		ok, next, err := s.Take(context.Background(), agent, limit, now)
		require.NoError(t, err)
		if ok {
			went = append(went, now)
			continue
		}
		require.True(t, next.After(now), "%s: told a later moment", limit)
		now = next
	}
	return went
}

// The schedule is exact at both ends of the range a file may declare and
// between: at 3/s the fourth turn is a second after the first, not at
// 999 ms (an interval kept in whole milliseconds let four into a second);
// at 99,999/s the second turn is 10,001 ns after the first (the interval
// was 0 ms: every call of every instance passed); at 1/m a minute apart.
func TestTheScheduleIsExactAtBothEndsOfItsRange(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		third := takeUntil(t, s, "third", workflow.Rate{Calls: 3, Per: time.Second}, 4)
		require.Equal(t, []time.Time{t0, t0.Add(333_333_334), t0.Add(666_666_667), t0.Add(time.Second)}, third)
		booked, shown, err := s.Booked(context.Background(), "third")
		require.NoError(t, err)
		require.Equal(t, t0.Add(time.Second+333_333_334), booked, "the operator's view: to the nanosecond")
		require.Equal(t, "3/s", shown)

		fast := takeUntil(t, s, "fast", workflow.Rate{Calls: 99_999, Per: time.Second}, 3)
		require.Equal(t, []time.Time{t0, t0.Add(10_001), t0.Add(20_001)}, fast)

		slow := workflow.Rate{Calls: 1, Per: time.Minute}
		require.Equal(t, []time.Time{t0, t0.Add(time.Minute)}, takeUntil(t, s, "slow", slow, 2))
		ok, next, err := s.Take(context.Background(), "slow", slow, t0.Add(2*time.Minute-time.Nanosecond))
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, t0.Add(2*time.Minute), next)
	})
}

// An instance taking every turn of 99,999/s for a second and more, in
// leases (virtual clock): each turn at the first's moment plus Span(i),
// to the nanosecond, the 99,999th a second after the first, the schedule
// never drifting across leases and the run's start moved on by whole
// periods; a few dozen writes for 200,000 turns.
func TestLeasesKeepTheScheduleExactAtTheLargestRate(t *testing.T) {
	eachTable(t, func(t *testing.T, _ flow.Store, tb table) {
		db := &writeCounter{DB: tb.db}
		s := flow.NewStore(db, tb.name)
		limit := workflow.Rate{Calls: 99_999, Per: time.Second}
		g := virtualGate(s)
		const n = 2*99_999 + 7
		for i := range n {
			v, err := g.Turn(context.Background(), "fast", limit, time.Time{}, t0)
			require.NoError(t, err)
			require.True(t, v.Turned)
			if want := t0.Add(limit.Span(int64(i))); !v.At.Equal(want) {
				require.Equal(t, want, v.At, "turn %d", i)
			}
		}
		require.Less(t, db.writes.Load(), int64(40), "leases of up to %d turns", int(flow.MaxLeaseSpan/limit.Interval()))
		booked, shown, err := s.Booked(context.Background(), "fast")
		require.NoError(t, err)
		require.Equal(t, "99999/s", shown)
		require.False(t, booked.Before(t0.Add(limit.Span(n))), "booked up to the last lease's end")
	})
}

// A lease's turn whose time passed unused is gone: an instance that comes
// back after its turns' times takes the first still due, never one of
// them (which would put more calls into a window than the limit); the next
// lease is no larger than what it used, and starts where the last ended.
func TestALeasedTurnWhoseTimePassedIsGone(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		ctx := context.Background()
		limit := workflow.Rate{Calls: 100, Per: time.Second} // 10 ms apart, leases of up to 20
		g := virtualGate(s)
		var at []time.Duration
		for range 7 { // leases of 1, 2, 4: turns 0 to 60 ms
			v, err := g.Turn(ctx, "ocr", limit, time.Time{}, t0)
			require.NoError(t, err)
			at = append(at, v.At.Sub(t0))
		}
		require.Equal(t, []time.Duration{0, 10, 20, 30, 40, 50, 60}, millis(at))
		v, err := g.Turn(ctx, "ocr", limit, time.Time{}, t0) // a lease of 8: 70 to 140 ms
		require.NoError(t, err)
		require.Equal(t, 70*time.Millisecond, v.At.Sub(t0))
		for _, want := range []time.Duration{130, 140} { // back at 125 ms: 80 to 120 are gone
			v, err := g.Turn(ctx, "ocr", limit, time.Time{}, t0.Add(125*time.Millisecond))
			require.NoError(t, err)
			require.Equal(t, want*time.Millisecond, v.At.Sub(t0))
		}
		booked, _, err := s.Booked(ctx, "ocr")
		require.NoError(t, err)
		require.Equal(t, t0.Add(150*time.Millisecond), booked, "the unused turns were not given back: gone")
		for _, want := range []time.Duration{150, 160, 170, 180} { // the next lease: 3 turns, as many as used
			v, err := g.Turn(ctx, "ocr", limit, time.Time{}, t0.Add(145*time.Millisecond))
			require.NoError(t, err)
			require.Equal(t, want*time.Millisecond, v.At.Sub(t0))
		}
		booked, _, err = s.Booked(ctx, "ocr")
		require.NoError(t, err)
		require.Equal(t, t0.Add(240*time.Millisecond), booked, "a lease of 3 (150-170) used whole, then of 6 (180-230)")
	})
}

func millis(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / time.Millisecond
	}
	return out
}

// An agent's schedule a version before this one kept (NextAt alone, in
// milliseconds: items of a deployed version exist) is read as it was: its
// turns are respected, the operator's view shows it, and a turn that
// version takes after this one wrote (it moves NextAt alone) is respected
// too; this version keeps NextAt, rounded up, for it.
func TestAScheduleAnEarlierVersionKeptIsRead(t *testing.T) {
	eachTable(t, func(t *testing.T, s flow.Store, tb table) {
		ctx := context.Background()
		db, table := tb.db, tb.name
		limit := workflow.Rate{Calls: 2, Per: time.Second}
		key := map[string]types.AttributeValue{"OrderID": &types.AttributeValueMemberS{Value: "~agent/ocr"},
			"SK": &types.AttributeValueMemberS{Value: "rate"}}
		item := map[string]types.AttributeValue{"NextAt": num(t0.Add(500 * time.Millisecond).UnixMilli()),
			"RateLimit": &types.AttributeValueMemberS{Value: "2/s"}}
		for k, v := range key {
			item[k] = v
		}
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item})
		require.NoError(t, err)
		booked, shown, err := s.Booked(ctx, "ocr")
		require.NoError(t, err)
		require.Equal(t, t0.Add(500*time.Millisecond), booked)
		require.Equal(t, "2/s", shown)

		ok, next, err := s.Take(ctx, "ocr", limit, t0)
		require.NoError(t, err)
		require.False(t, ok, "its turn up to 500 ms was taken")
		require.Equal(t, t0.Add(500*time.Millisecond), next)
		ok, _, err = s.Take(ctx, "ocr", limit, next)
		require.NoError(t, err)
		require.True(t, ok)
		got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Equal(t, num(t0.Add(time.Second).UnixMilli()), got.Item["NextAt"], "kept for the earlier version")

		// The earlier version takes the turn at 1 s (its busy write).
		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key,
			UpdateExpression: aws.String("SET NextAt = NextAt + :i"), ExpressionAttributeValues: map[string]types.AttributeValue{":i": num(500)}})
		require.NoError(t, err)
		ok, next, err = s.Take(ctx, "ocr", limit, t0.Add(time.Second))
		require.NoError(t, err)
		require.False(t, ok, "the earlier version took it")
		require.Equal(t, t0.Add(1500*time.Millisecond), next)
		booked, _, err = s.Booked(ctx, "ocr")
		require.NoError(t, err)
		require.Equal(t, t0.Add(1500*time.Millisecond), booked)
	})
}

// writeCounter counts the writes made through it.
type writeCounter struct {
	flow.DB
	writes atomic.Int64
}

func (w *writeCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput,
	opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	w.writes.Add(1)
	return w.DB.UpdateItem(ctx, in, opts...)
}

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
