package statestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// TaskFilter is what a search of the orders keeps; its zero value keeps
// every order.
type TaskFilter struct {
	State         workflow.State // "": any
	Prefix        string         // the order id starts with it
	Workflow      string         // the order's workflow's name
	CreatedAfter  time.Time      // created after it (zero: any time)
	CreatedBefore time.Time      // created before it (zero: any time)
	Version       string         // the workflow's version it runs
	EndedAfter    time.Time      // ended after it (zero: any time, or none)
	EndedBefore   time.Time      // ended before it (zero: any time, or none)
	// Step, Agent and Reason keep an order one of whose records it is at
	// (Task.At) has that step, that agent, and that reason
	// (Spot.Matches); they are not in the scan's FilterExpression (the
	// records are a map of the item), so they are tested on the items read.
	Step, Agent, Reason string
	// Unended keeps the orders not ended only (those in flight or held).
	Unended bool
}

// Keeps reports whether the filter keeps task t (the same test the scan's
// FilterExpression makes, for lists read otherwise).
func (f TaskFilter) Keeps(t Task) bool {
	return (f.State == "" || t.State == f.State) && strings.HasPrefix(t.OrderID, f.Prefix) &&
		(f.Workflow == "" || t.Workflow == f.Workflow) &&
		(f.CreatedAfter.IsZero() || t.CreatedAt.After(f.CreatedAfter)) &&
		(f.CreatedBefore.IsZero() || t.CreatedAt.Before(f.CreatedBefore)) &&
		(f.Version == "" || t.Version == f.Version) &&
		(f.EndedAfter.IsZero() || t.CompletedAt.After(f.EndedAfter)) &&
		(f.EndedBefore.IsZero() || (!t.CompletedAt.IsZero() && t.CompletedAt.Before(f.EndedBefore))) &&
		f.keepsSpots(t) && (!f.Unended || !t.State.Ended())
}

// keepsSpots reports whether one of the records t is at has the filter's
// step, agent and reason (true if it names none).
func (f TaskFilter) keepsSpots(t Task) bool {
	if f.Step == "" && f.Agent == "" && f.Reason == "" {
		return true
	}
	return slices.ContainsFunc(t.At, func(s Spot) bool {
		return (f.Step == "" || s.Step == f.Step) && (f.Agent == "" || s.Agent == f.Agent) &&
			(f.Reason == "" || s.Matches(f.Reason))
	})
}

// expression is the filter as a scan's FilterExpression and its
// placeholders.
func (f TaskFilter) expression() (x.Expr, error) {
	b := x.New()
	keep := []x.Cond{taskOnly(b)}
	if f.State != "" {
		keep = append(keep, x.Equal(b.Plain("St"), b.String(string(f.State))))
	}
	if f.Prefix != "" {
		keep = append(keep, x.BeginsWith(b.Plain(topology.KeyOrderID), b.String(f.Prefix)))
	}
	if f.Workflow != "" {
		keep = append(keep, x.Equal(b.Plain("Wf"), b.String(f.Workflow)))
	}
	if f.Version != "" {
		keep = append(keep, x.Equal(b.Plain("Wv"), b.String(f.Version)))
	}
	for _, bound := range []struct {
		at   time.Time
		attr string // C: created, E: ended
		cmp  func(a, b x.Operand) x.Cond
	}{{f.CreatedAfter, "C", x.Greater}, {f.CreatedBefore, "C", x.Less}, {f.EndedAfter, "E", x.Greater}, {f.EndedBefore, "E", x.Less}} {
		if !bound.at.IsZero() {
			keep = append(keep, bound.cmp(b.Plain(bound.attr), b.Int(bound.at.UnixMilli())))
		}
	}
	return condition(b, keep...)
}

// taskOnly keeps the state items of orders (not a workflow's definition,
// nor a result).
func taskOnly(b *x.Builder) x.Cond { return x.Equal(b.Plain(topology.KeySort), b.String(taskSK)) }

// tasksOnly is a scan's filter that keeps the state items of orders.
func tasksOnly() (x.Expr, error) {
	b := x.New()
	return condition(b, taskOnly(b))
}

// SearchTasks returns up to limit task records the filter keeps, starting
// after the page token from an earlier call ("" for the first page); the
// returned token is "" after the last page. It scans the state table, with
// the filter as the scan's FilterExpression: DynamoDB sends back only the
// orders kept, but bills every item it reads, so a page of a narrow search
// may read much of the table (or all of it) to fill itself.
func (s *Store) SearchTasks(ctx context.Context, f TaskFilter, limit int, token string) ([]Task, string, error) {
	start, err := decodeToken(token)
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	filter, err := f.expression()
	if err != nil {
		return nil, "", err
	}
	var out []Task
	for {
		page, err := s.db.Scan(ctx, &dynamodb.ScanInput{
			TableName: &s.state, FilterExpression: &filter.Condition, ExpressionAttributeValues: filter.Values,
			ExclusiveStartKey: start, Limit: aws.Int32(int32(max(limit-len(out), 1) * 8)),
		})
		if err != nil {
			return nil, "", fmt.Errorf("list tasks: %w", err)
		}
		for i, item := range page.Items {
			var it stateItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return nil, "", fmt.Errorf("decode task: %w", err)
			}
			t := it.task()
			if !f.Keeps(t) {
				continue
			}
			out = append(out, t)
			if len(out) == limit {
				if i == len(page.Items)-1 && page.LastEvaluatedKey == nil {
					return out, "", nil
				}
				return out, encodeToken(it.OrderID), nil
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, "", nil
		}
		start = page.LastEvaluatedKey
	}
}

// Census is the orders by state and the steps at work of those in flight
// (not ended): ready and waiting for a claim (their message in a queue),
// claimed (an attempt running), or parked.
type Census struct {
	ByState     map[workflow.State]int
	Waiting     int           // ready records not claimed (or, a wait or timer, not armed) yet
	Running     int           // claimed records
	Parked      int           // waits and timers armed: waiting for an event or a time, costing nothing
	LongestWait time.Duration // how long the longest-waiting ready record has waited
}

// Census counts the orders by state and their records at work, as of now (a
// scan of the state table: DynamoDB bills a scan by the items read, whatever
// it projects, so reading the records costs no more than the states).
func (s *Store) Census(ctx context.Context, now time.Time) (Census, error) {
	c := Census{ByState: map[workflow.State]int{}}
	filter, err := tasksOnly()
	if err != nil {
		return c, err
	}
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{
		TableName: &s.state, FilterExpression: &filter.Condition, ExpressionAttributeValues: filter.Values,
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return c, fmt.Errorf("count tasks: %w", err)
		}
		for _, item := range page.Items {
			var it stateItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return c, fmt.Errorf("decode task: %w", err)
			}
			c.add(it, now)
		}
	}
	return c, nil
}

// add counts order it: its state, and, only while it is in flight, its
// records at work. An ended order's records are at work no more, whatever
// they still hold (a cancelled order's step that never ran stays ready).
func (c *Census) add(it stateItem, now time.Time) {
	state := workflow.State(it.State)
	c.ByState[state]++
	if state.Ended() {
		return
	}
	for _, r := range it.Recs {
		switch {
		case r.State == string(workflow.Processing):
			c.Running++
		case r.State == string(workflow.Pending) && r.DueAt != 0 && r.Armed != 0:
			c.Parked++
		case r.State == string(workflow.Pending) && r.DueAt != 0 && r.ReadyAt != 0:
			c.Waiting++
			c.LongestWait = max(c.LongestWait, now.Sub(fromMs(r.ReadyAt)))
		}
	}
}

// A page token is the OrderID of the last task returned.
func encodeToken(orderID string) string {
	b, _ := json.Marshal(map[string]string{"o": orderID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(token string) (map[string]types.AttributeValue, error) {
	if token == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	var v map[string]string
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil || v["o"] == "" {
		return nil, fmt.Errorf("%w %q", ErrBadPageToken, token)
	}
	return key(v["o"], taskSK), nil
}

// ScanAll reads every task and record of the state table in one paged scan:
// for checks over a whole run (a test's or the chaos run's), not a hot path.
func (s *Store) ScanAll(ctx context.Context) (map[string]Task, map[string][]Step, error) {
	tasks, steps := map[string]Task{}, map[string][]Step{}
	filter, err := tasksOnly()
	if err != nil {
		return nil, nil, err
	}
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{TableName: &s.state, ConsistentRead: aws.Bool(true),
		FilterExpression: &filter.Condition, ExpressionAttributeValues: filter.Values})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("scan state: %w", err)
		}
		for _, item := range page.Items {
			var it stateItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return nil, nil, fmt.Errorf("decode state item: %w", err)
			}
			tasks[it.OrderID], steps[it.OrderID] = it.task(), it.steps()
		}
	}
	return tasks, steps, nil
}
