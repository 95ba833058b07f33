package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// SendOrders sends raw order bodies to the orders queue, ten per request.
func (s *Stack) SendOrders(ctx context.Context, bodies ...string) error {
	return s.send(ctx, s.Topology().OrdersQueue().Name, bodies)
}

// SendEvents sends raw event bodies to the events queue, ten per request.
func (s *Stack) SendEvents(ctx context.Context, bodies ...string) error {
	return s.send(ctx, s.Topology().EventsQueue().Name, bodies)
}

// maxPointerBytes bounds an SQS Extended Client pointer message (its
// bucket's name and a key under incoming/: a few hundred bytes).
const maxPointerBytes = 1 << 10

// send sends raw bodies to the queue, ten per request and at most SQS's
// 256 KiB a request; a body over that is kept in the payload bucket and an
// SQS Extended Client pointer to it sent in its place, as a sender of
// large orders does.
func (s *Stack) send(ctx context.Context, queue string, bodies []string) error {
	url := s.QueueURL(queue)
	for len(bodies) > 0 {
		var entries []types.SendMessageBatchRequestEntry
		size := 0
		for len(bodies) > 0 && len(entries) < 10 {
			b := bodies[0]
			byPointer, weight := len(b) > offload.MaxMessageBytes, len(b)
			if byPointer {
				weight = maxPointerBytes
			}
			if len(entries) > 0 && size+weight > offload.MaxMessageBytes {
				break // for the next request: a body offloaded only once it is sent (else a clear copy no one took)
			}
			if byPointer {
				ptr, err := s.Deployment.Offload().OffloadAs(ctx, s.offloads.next([]byte(b)), []byte(b))
				if err != nil {
					return err
				}
				b = ptr
			}
			size += len(b)
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(len(entries))), MessageBody: aws.String(b)})
			bodies = bodies[1:]
		}
		out, err := s.Deployment.Clients.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			return fmt.Errorf("send to %s: %w", queue, err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("send to %s: %d of a batch refused: %s", queue, len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
	}
	return nil
}

// DemoOrder is a well-formed order with a deterministic content.
func DemoOrder(id string, i int) shop.Order {
	return shop.Order{OrderID: id, CustomerID: fmt.Sprintf("customer-%d", i%97),
		Items: []shop.Item{{SKU: fmt.Sprintf("SKU-%d", i%13), Quantity: 1 + i%3, UnitPriceCents: int64(499 + i%1000)}}}
}

// Counts are the orders of a set by the state of their task.
type Counts struct {
	Total, Running, Compensating, Processed, Failed, CompensationFailed, Cancelled, Missing int
}

// Ended is how many orders reached an end state.
func (c Counts) Ended() int { return c.Processed + c.Failed + c.CompensationFailed + c.Cancelled }

// Count reads the task records of the orders.
func (s *Stack) Count(ctx context.Context, ids []string) (Counts, map[string]statestore.Task, error) {
	tasks, err := s.Store.Tasks(ctx, ids)
	if err != nil {
		return Counts{}, nil, err
	}
	return CountTasks(ids, tasks), tasks, nil
}

// CountTasks counts the orders by the state of their task; an order with no
// task is Missing.
func CountTasks(ids []string, tasks map[string]statestore.Task) Counts {
	c := Counts{Total: len(ids)}
	for _, id := range ids {
		t, ok := tasks[id]
		switch {
		case !ok:
			c.Missing++
		case t.State == workflow.Processed:
			c.Processed++
		case t.State == workflow.Failed:
			c.Failed++
		case t.State == workflow.CompensationFailed:
			c.CompensationFailed++
		case t.State == workflow.Cancelled:
			c.Cancelled++
		case t.State == workflow.Compensating:
			c.Compensating++
		default:
			c.Running++
		}
	}
	return c
}

// WaitEnded polls until every order's task has ended or ctx ends, calling
// progress after each poll. A poll reads the orders not yet seen ended: an
// order that ended stays so (only an operator's resubmit or retry starts it
// again), so what it ended as is kept, not read again. It returns every
// order's task as last read.
func (s *Stack) WaitEnded(ctx context.Context, ids []string, every time.Duration, progress func(Counts)) (map[string]statestore.Task, error) {
	tasks := make(map[string]statestore.Task, len(ids))
	left := ids
	for {
		read, err := s.Store.Tasks(ctx, left)
		if err == nil {
			maps.Copy(tasks, read)
			left = notEnded(left, tasks)
		}
		c := CountTasks(ids, tasks)
		if err == nil && progress != nil {
			progress(c)
		}
		if err == nil && c.Ended() == c.Total {
			return tasks, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d of %d orders not ended: %w", c.Total-c.Ended(), c.Total, ctx.Err())
			}
			return tasks, err
		case <-time.After(every):
		}
	}
}

// notEnded are the ids whose task is not known to have ended.
func notEnded(ids []string, tasks map[string]statestore.Task) []string {
	var out []string
	for _, id := range ids {
		if t, ok := tasks[id]; !ok || !t.State.Ended() {
			out = append(out, id)
		}
	}
	return out
}

// Peek returns the messages visible on a queue now, leaving them there
// (hidden for a minute).
func (s *Stack) Peek(ctx context.Context, queueURL string) ([]types.Message, error) {
	var out []types.Message
	for {
		res, err := s.Deployment.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &queueURL, MaxNumberOfMessages: 10, VisibilityTimeout: 60,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return out, fmt.Errorf("peek %s: %w", queueURL, err)
		}
		if len(res.Messages) == 0 {
			return out, nil
		}
		out = append(out, res.Messages...)
	}
}

// Alerts returns the failure events in the alert inbox so far.
func (s *Stack) Alerts(ctx context.Context) ([]alert.Failure, error) {
	msgs, err := s.Peek(ctx, s.AlertInbox)
	var out []alert.Failure
	for _, m := range msgs {
		var f alert.Failure
		if jerr := json.Unmarshal([]byte(aws.ToString(m.Body)), &f); jerr == nil {
			out = append(out, f)
		}
	}
	return out, err
}

// Signal sends an event to an order on the events queue, as a client (or
// sasctl signal) does: its data as it is (encoding/json would write each
// <, > and & of it as six bytes: a callback would not carry what its
// service answered).
func (s *Stack) Signal(ctx context.Context, e message.Event) error {
	e.Kind = message.KindEvent
	b, err := hostile.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	return s.SendEvents(ctx, b)
}

// Callbacks has a remote simulator's async services answer through the
// events queue: each answer an event carrying the call's token, as a real
// async service's would be.
func (s *Stack) Callbacks(log func(err error)) func(remotesim.Callback) {
	return func(c remotesim.Callback) {
		err := s.Signal(context.Background(), message.Event{OrderID: c.OrderID, Token: c.Token, Data: c.Answer})
		if err != nil && log != nil {
			log(fmt.Errorf("callback of %s: %w", c.OrderID, err))
		}
	}
}
