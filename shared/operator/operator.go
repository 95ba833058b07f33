// Package operator is what the sasctl CLI does against a deployment (AWS,
// LocalStack or a local emulator): submit orders, show an order's status and
// timeline, list and count orders by state, resubmit a failed order, and
// redrive a dead-letter queue.
package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Operator acts on one deployment.
type Operator struct {
	Store    *statestore.Store
	Topology topology.Topology
	// PickupTimeout is a resubmitted step's pickup deadline.
	PickupTimeout time.Duration
	Now           func() time.Time

	sqs  *sqs.Client
	mu   sync.Mutex
	urls map[string]string
}

// New returns an operator for the deployment the topology describes.
func New(c *awsclient.Clients, t topology.Topology) *Operator {
	return &Operator{
		Store:         statestore.New(c.DynamoDB, t.OrdersTable(), t.StateTable(), t.DeadlineShards),
		Topology:      t,
		PickupTimeout: workflow.DefaultSettings().PickupTimeout,
		Now:           time.Now,
		sqs:           c.SQS,
		urls:          map[string]string{},
	}
}

// QueueURL looks up (once) the URL of a queue of the deployment.
func (o *Operator) QueueURL(ctx context.Context, name string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if u, ok := o.urls[name]; ok {
		return u, nil
	}
	out, err := o.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w", name, err)
	}
	o.urls[name] = aws.ToString(out.QueueUrl)
	return o.urls[name], nil
}

// QueueDepths are the messages waiting on each work queue a step's message
// goes through (the scheduler queue and each agent's request and response
// queues), by queue name.
func (o *Operator) QueueDepths(ctx context.Context) (map[string]int, error) {
	t := o.Topology
	names := []string{t.SchedulerQueue().Name}
	for _, a := range t.Agents {
		names = append(names, t.AgentRequests(a).Name, t.AgentResponses(a).Name)
	}
	out := map[string]int{}
	for _, name := range names {
		url, err := o.QueueURL(ctx, name)
		if err != nil {
			return nil, err
		}
		if out[name], err = queue.NewSender(o.sqs).Depth(ctx, url); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Resubmitted says what a resubmission did.
type Resubmitted struct {
	OrderID string `json:"orderId"`
	Step    string `json:"step"`
	Undo    bool   `json:"undo"`
	Round   int    `json:"round"`
}

// Resubmit puts a Failed or CompensationFailed order back to work (see
// statestore.Store.Resubmit) and tells the Scheduler. A refusal is a
// *statestore.NotResubmittableError with the reason.
func (o *Operator) Resubmit(ctx context.Context, orderID, step string) (Resubmitted, error) {
	url, err := o.QueueURL(ctx, o.Topology.SchedulerQueue().Name)
	if err != nil {
		return Resubmitted{}, err
	}
	res, err := o.Store.Resubmit(ctx, orderID, step, o.PickupTimeout, o.Now())
	if err != nil {
		return Resubmitted{}, err
	}
	// If this message is lost, the step's pickup deadline brings the Supervisor.
	if err := queue.NewSender(o.sqs).SendJSON(ctx, url, message.NewSchedule(orderID, res.Ref), 0); err != nil {
		return Resubmitted{}, err
	}
	return Resubmitted{OrderID: orderID, Step: res.Step, Undo: res.Ref.Undo, Round: res.Round}, nil
}
