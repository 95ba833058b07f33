package statestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// ListTasks returns up to limit task records, in the state given ("" for
// any), starting after the page token from an earlier call ("" for the
// first page). The returned token is "" after the last page. It scans the
// state table: an operator's tool, not a hot path; its cost follows the table.
func (s *Store) ListTasks(ctx context.Context, state workflow.State, limit int, token string) ([]Task, string, error) {
	start, err := decodeToken(token)
	if err != nil {
		return nil, "", err
	}
	filter := "SK = :task"
	vals := map[string]types.AttributeValue{":task": str(taskSK)}
	if state != "" {
		filter += " AND St = :state"
		vals[":state"] = str(string(state))
	}
	var out []Task
	for {
		page, err := s.db.Scan(ctx, &dynamodb.ScanInput{
			TableName: &s.state, FilterExpression: aws.String(filter), ExpressionAttributeValues: vals,
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
			out = append(out, it.task())
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

// CountTasks counts the task records by state (a scan of the state table).
func (s *Store) CountTasks(ctx context.Context) (map[workflow.State]int, error) {
	c, err := s.Census(ctx, time.Now())
	return c.ByState, err
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
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{
		TableName: &s.state, FilterExpression: aws.String("SK = :task"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":task": str(taskSK)},
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
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{TableName: &s.state, ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("SK = :task"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":task": str(taskSK)}})
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
