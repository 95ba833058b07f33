package statestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
)

// ErrCensusLost means another supervisor took the census over (its lease
// had run out): what this one counted since its last save is dropped.
var ErrCensusLost = errors.New("census taken over by another supervisor")

// VersionCensus is the census of the orders in flight by workflow and version: a
// pass reads the whole in-flight listing (InFlight) once a period, over as
// many Supervisor runs as it takes, each resuming from the cursor the last
// one saved. One small item of the state table keeps it; a supervisor
// claims it with a conditional write on its revision, and holds it until
// its lease ends, so one census runs at a time however many supervisors do.
type VersionCensus struct {
	Started time.Time // when the pass began
	Ended   time.Time // when it ended; zero while it runs
	Cursor  string    // the in-flight listing's page token to read next ("" at the start)
	Tally   Tally     // what the pass counted up to Cursor
	Owner   string    // who holds it, until Lease
	Lease   time.Time
	Rev     int64 // its revision: every write is conditional on the one read
}

// VersionCensusClaim asks for the census: Owner takes it when a new pass is due
// (none ever ran, or the last one began Every ago and ended) or a pass's
// lease ran out (its owner stopped: Owner resumes it from its cursor). It
// holds it for Lease.
type VersionCensusClaim struct {
	Owner string
	Now   time.Time
	Every time.Duration
	Lease time.Duration
}

// versionCensusKey is the census item's key ("#" is in no OrderID).
func versionCensusKey() map[string]types.AttributeValue { return key("census#versions", "CENSUS") }

// ClaimVersionCensus gives c.Owner the census when it is due (ok), resumed or a
// new pass; when it is not (another holds it, or the pass of this period
// ended), or another supervisor claimed it first, ok is false.
func (s *Store) ClaimVersionCensus(ctx context.Context, c VersionCensusClaim) (cen VersionCensus, ok bool, err error) {
	cur, found, err := s.readVersionCensus(ctx)
	if err != nil {
		return cur, false, err
	}
	next := cur
	switch {
	case !found || (!cur.Ended.IsZero() && !c.Now.Before(cur.Started.Add(c.Every))):
		next = VersionCensus{Started: c.Now, Tally: Tally{}, Rev: cur.Rev}
	case cur.Ended.IsZero() && !c.Now.Before(cur.Lease):
		// its owner stopped: resume from its cursor
	default:
		return cur, false, nil
	}
	next.Owner, next.Lease = c.Owner, c.Now.Add(c.Lease)
	saved, err := s.writeVersionCensus(ctx, next, cur.Rev, "")
	if errors.Is(err, ErrCensusLost) {
		return cur, false, nil
	}
	return saved, err == nil, err
}

// VersionCensusPage counts the next page of up to limit orders in flight into c
// and moves its cursor on; done says the listing ended (SaveVersionCensus ends the
// pass). Nothing is written: SaveVersionCensus keeps what was counted.
func (s *Store) VersionCensusPage(ctx context.Context, c *VersionCensus, limit int) (done bool, err error) {
	tasks, next, err := s.InFlight(ctx, limit, c.Cursor)
	if err != nil {
		return false, fmt.Errorf("census: %w", err)
	}
	c.Tally.Add(tasks)
	c.Cursor = next
	return next == "", nil
}

// SaveVersionCensus keeps what c's owner counted, with its cursor, and lets the
// census go: the pass ends at now if done, or else the next supervisor
// to claim it resumes from the cursor at once. It returns ErrCensusLost if
// another supervisor took the census over since c was claimed.
func (s *Store) SaveVersionCensus(ctx context.Context, c VersionCensus, done bool, now time.Time) (VersionCensus, error) {
	next := c
	next.Owner, next.Lease = "", time.Time{}
	if done {
		next.Ended, next.Cursor = now, ""
	}
	return s.writeVersionCensus(ctx, next, c.Rev, c.Owner)
}

// readVersionCensus reads the census item (found: it exists).
func (s *Store) readVersionCensus(ctx context.Context) (VersionCensus, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.state, Key: versionCensusKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return VersionCensus{}, false, fmt.Errorf("read the census: %w", err)
	}
	if out.Item == nil {
		return VersionCensus{}, false, nil
	}
	c := VersionCensus{Started: msAttr(out.Item, "St"), Ended: msAttr(out.Item, "En"), Lease: msAttr(out.Item, "Ls"),
		Cursor: strAttr(out.Item, "Cur"), Owner: strAttr(out.Item, "Own"), Tally: Tally{}}
	c.Rev, _ = strconv.ParseInt(numAttr(out.Item, "Rev"), 10, 64)
	if t := strAttr(out.Item, "Tally"); t != "" {
		if err := json.Unmarshal([]byte(t), &c.Tally); err != nil {
			return c, true, fmt.Errorf("read the census: its tally: %w", err)
		}
	}
	return c, true, nil
}

// writeVersionCensus writes c whole as revision rev+1, if the item is still at
// rev (none: absent) and, if owner is set, held by owner.
func (s *Store) writeVersionCensus(ctx context.Context, c VersionCensus, rev int64, owner string) (VersionCensus, error) {
	tally, err := json.Marshal(c.Tally)
	if err != nil {
		return c, fmt.Errorf("write the census: %w", err)
	}
	b := x.New()
	b.Set(b.Plain("St"), b.Int(c.Started.UnixMilli()))
	b.Set(b.Plain("En"), b.Int(msOrZero(c.Ended)))
	b.Set(b.Plain("Ls"), b.Int(msOrZero(c.Lease)))
	b.Set(b.Plain("Cur"), b.String(c.Cursor))
	b.Set(b.Plain("Own"), b.String(c.Owner))
	b.Set(b.Plain("Tally"), b.String(string(tally)))
	b.Set(b.Plain("Rev"), b.Int(rev+1))
	if rev == 0 {
		b.If(x.NotExists(b.Plain(topology.KeyOrderID)))
	} else {
		b.If(x.Equal(b.Plain("Rev"), b.Int(rev)))
	}
	if owner != "" {
		b.If(x.Equal(b.Plain("Own"), b.String(owner)))
	}
	in, err := b.UpdateInput(s.state, versionCensusKey())
	if err != nil {
		return c, fmt.Errorf("write the census: %w", err)
	}
	if _, err := s.db.UpdateItem(ctx, in); err != nil {
		if isConditionFailed(err) {
			return c, ErrCensusLost
		}
		return c, fmt.Errorf("write the census: %w", err)
	}
	c.Rev = rev + 1
	return c, nil
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func msAttr(item map[string]types.AttributeValue, name string) time.Time {
	ms, _ := strconv.ParseInt(numAttr(item, name), 10, 64)
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func numAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return "0"
}

func strAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
