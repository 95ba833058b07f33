package operator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
)

// Submitted says what a submission did.
type Submitted struct {
	Sent     int        `json:"sent"`
	Queue    string     `json:"queue"`
	Rejected []Rejected `json:"rejected"`
}

// Rejected is an input the CLI did not send, and why.
type Rejected struct {
	Item   int    `json:"item"` // 1-based position in the input
	Reason string `json:"reason"`
}

// Submit validates each order body as Submission would (admit) and sends
// the valid ones to the orders queue, ten per request; invalid ones are not
// sent and are reported with their reasons.
func (o *Operator) Submit(ctx context.Context, bodies []string) (Submitted, error) {
	q := o.Topology.OrdersQueue().Name
	res := Submitted{Queue: q, Rejected: []Rejected{}}
	url, err := o.QueueURL(ctx, q)
	if err != nil {
		return res, err
	}
	var batch []types.SendMessageBatchRequestEntry
	size := 0 // the batch's bytes: SQS takes 256 KiB a request
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		size = 0
		out, err := o.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: batch})
		if err != nil {
			return fmt.Errorf("send orders: %w", err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("send orders: %d refused by SQS: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
		res.Sent += len(batch)
		batch = batch[:0]
		return nil
	}
	for i, b := range bodies {
		refused, err := o.admit(ctx, b)
		if err != nil {
			return res, err
		}
		if refused != nil {
			res.Rejected = append(res.Rejected, Rejected{Item: i + 1, Reason: strings.TrimPrefix(refused.Error(), "invalid message: ")})
			continue
		}
		b = asSent(b)
		if len(b) > offload.MaxMessageBytes {
			// As the SQS Extended Client sends it: kept in the payload
			// bucket, a pointer to it on the queue.
			ptr, err := o.offload(ctx, "", []byte(b)) // a new order: the bucket it is told
			if err != nil {
				return res, fmt.Errorf("order %d is %d bytes: %w", i+1, len(b), err)
			}
			b = ptr
		}
		if size+len(b) > offload.MaxMessageBytes {
			if err := flush(); err != nil {
				return res, err
			}
		}
		batch = append(batch, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(b)})
		size += len(b)
		if len(batch) == 10 {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	return res, flush()
}

// offload keeps body, over SQS's 256 KiB, in the payload bucket (bucket,
// the one the claim checks of the order it is for name, else
// PayloadBucket), and returns the pointer to send in its place, as the
// SQS Extended Client does: Submission follows it (a pointer to another
// bucket than its deployment's it refuses).
func (o *Operator) offload(ctx context.Context, bucket string, body []byte) (string, error) {
	bucket = cmp.Or(bucket, o.PayloadBucket)
	if bucket == "" {
		return "", fmt.Errorf("over SQS's %d bytes, so it goes by pointer, kept in the payload bucket first: %w", offload.MaxMessageBytes, ErrNoPayloadBucket)
	}
	ptr, err := offload.New(o.s3, bucket).Offload(ctx, body)
	if err != nil {
		return "", fmt.Errorf("over SQS's %d bytes, so kept in the payload bucket first: %w (the stack's output PayloadBucketName: --payload-bucket)",
			offload.MaxMessageBytes, err)
	}
	return ptr, nil
}

// DecodeOrder decodes an order body as Submission does (message.DecodeOrder),
// its id the member its workflow names if the deployment's workflows are
// known (Workflows); otherwise its orderId, and a refusal for an id it
// lacks says so.
func (o *Operator) DecodeOrder(body string) (message.Order, error) {
	ord, err := message.DecodeOrder(body, o.Workflows)
	if message.MissingID(err) && o.Workflows.IsZero() {
		return ord, fmt.Errorf("%w (the deployment's workflows are not known here, so an order's id is read as its orderId: "+
			"give them, sasctl's --workflows or client.Options.Workflows, for a workflow that names another id field)", err)
	}
	return ord, err
}

// admit checks an order body as Submission does before it stores it: its
// envelope, then, when the deployment's workflows are known, the workflow
// it names (or, one the deployment no longer runs, the one it was stored
// with) and the order against that workflow's schema and forEach items.
// refused says why Submission would refuse it; err, that the check itself
// failed.
func (o *Operator) admit(ctx context.Context, body string) (refused, err error) {
	ord, refused := o.DecodeOrder(body)
	if refused != nil || o.Workflows.IsZero() {
		return refused, nil
	}
	def, notRun := o.Workflows.Lookup(ord.Workflow)
	if notRun != nil {
		stored, err := o.Store.Definition(ctx, ord.OrderID)
		if errors.Is(err, statestore.ErrNotFound) {
			return fmt.Errorf("order %s: %w", ord.OrderID, notRun), nil
		}
		if err != nil {
			return nil, fmt.Errorf("order %s: its stored workflow: %w", ord.OrderID, err)
		}
		def = stored
	}
	if _, err := def.Admit(json.RawMessage(ord.JSON()), o.Now()); err != nil {
		return fmt.Errorf("order %s: %w", ord.OrderID, err), nil
	}
	return nil, nil
}

// asSent is an order's body as Submit sends it: U+FFFE and U+FFFF (valid
// JSON and UTF-8, which SQS refuses in a body) escaped, as the product's
// own messages carry them (kept.Wire): the same order, a body SQS takes,
// and the one Submission stores.
func asSent(body string) string { return string(kept.Wire([]byte(body))) }

// QueueNames are the short names redrive takes: orders, scheduler,
// agent-<name>-requests, agent-<name>-responses.
func (o *Operator) QueueNames() []string {
	var out []string
	for _, q := range o.Topology.Queues() {
		out = append(out, strings.TrimPrefix(q.Name, o.Topology.Prefix+"-"))
	}
	return out
}

func (o *Operator) queueByShortName(short string) (topology.Queue, error) {
	for _, q := range o.Topology.Queues() {
		if q.Name == o.Topology.Prefix+"-"+short {
			return q, nil
		}
	}
	return topology.Queue{}, fmt.Errorf("no queue %q; the queues are %s", short, strings.Join(o.QueueNames(), ", "))
}

// Redriven says what a redrive moved.
type Redriven struct {
	// Left are the messages looked at that a query did not keep
	// (RedriveMatching): visible in the DLQ again at once.
	Left  int    `json:"left,omitempty"`
	Moved int    `json:"moved"`
	From  string `json:"from"` // the dead-letter queue
	To    string `json:"to"`   // its queue
}

// Redrive moves up to max messages from a queue's DLQ back to the queue and
// says how many it moved (also with an error, those moved before it). It
// first takes what the DLQ holds (hidden from other readers for five
// minutes), then moves it, so a message that fails again and returns to the
// DLQ meanwhile is not moved twice. Each message is sent before it is
// deleted: a crash in between duplicates, never loses.
func (o *Operator) Redrive(ctx context.Context, short string, max int) (Redriven, error) {
	res, err := o.RedriveAll(ctx, short, max)
	return res.Redriven, err
}

// RedriveAll is Redrive, saying which messages it moved.
func (o *Operator) RedriveAll(ctx context.Context, short string, max int) (DLQRedriven, error) {
	return o.RedrivePaced(ctx, short, max, BulkOptions{})
}

// redriveEnds are a queue's and its DLQ's URLs, and an empty result.
func (o *Operator) redriveEnds(ctx context.Context, short string) (q topology.Queue, src, dlq string, res DLQRedriven, err error) {
	if q, err = o.queueByShortName(short); err != nil {
		return q, "", "", res, err
	}
	res = DLQRedriven{Redriven: Redriven{From: q.DLQName, To: q.Name}, Messages: []DLQMessage{}}
	if src, err = o.QueueURL(ctx, q.Name); err != nil {
		return q, "", "", res, err
	}
	dlq, err = o.QueueURL(ctx, q.DLQName)
	return q, src, dlq, res, err
}

// move sends each message back to its queue (its body only, without the
// reason), then deletes it from the DLQ, and adds it to res; before each
// but the first, it waits (nil: not): a wait that fails (its context
// ended) stops it, and the messages not moved are visible again at once.
func (o *Operator) move(ctx context.Context, q topology.Queue, src, dlq string, msgs []types.Message, res *DLQRedriven,
	wait func(context.Context) error) error {
	now := o.Now()
	for i, m := range msgs {
		if wait != nil && i > 0 {
			if err := wait(ctx); err != nil {
				o.unhide(dlq, msgs[i:])
				return fmt.Errorf("stopped with %d messages left in %s: %w", len(msgs)-i, q.DLQName, err)
			}
		}
		if _, err := o.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &src, MessageBody: m.Body}); err != nil {
			return fmt.Errorf("send to %s: %w", q.Name, err)
		}
		res.Moved++
		d := o.dlqMessage(m, now)
		d.Body = ""
		res.Messages = append(res.Messages, d)
		if _, err := o.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &dlq, ReceiptHandle: m.ReceiptHandle}); err != nil {
			return fmt.Errorf("delete from %s (its last message was sent, and stays in it too): %w", q.DLQName, err)
		}
	}
	return nil
}

// take receives up to max messages of a dead-letter queue, hiding them for
// five minutes.
func (o *Operator) take(ctx context.Context, url, name string, max int) ([]types.Message, error) {
	var taken []types.Message
	err := o.takeEach(ctx, url, name, func(m types.Message) bool {
		taken = append(taken, m)
		return len(taken) < max
	})
	return taken, err
}

// takeEach receives a dead-letter queue's messages, hiding them for five
// minutes, and hands each to more until it says no more or the queue shows
// none; a batch's messages after more said no are handed over all the same
// (they are received: the caller keeps or unhides them).
func (o *Operator) takeEach(ctx context.Context, url, name string, more func(types.Message) bool) error {
	for want := true; want; {
		out, err := o.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url,
			MaxNumberOfMessages: 10, VisibilityTimeout: 300, WaitTimeSeconds: 1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if len(out.Messages) == 0 {
			return nil
		}
		for _, m := range out.Messages {
			want = more(m) && want
		}
	}
	return nil
}

// FindAgents reads the deployment's agents from its queues' names (each
// agent has a queue <prefix>-agent-<name>-requests), for a caller that was
// not told them.
func (o *Operator) FindAgents(ctx context.Context) ([]string, error) {
	head := o.Topology.Prefix + "-agent-"
	var agents []string
	p := sqs.NewListQueuesPaginator(o.sqs, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(head), MaxResults: aws.Int32(1000)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the queues of %s: %w", o.Topology.Prefix, err)
		}
		for _, url := range page.QueueUrls {
			name := url[strings.LastIndex(url, "/")+1:]
			if agent, ok := strings.CutSuffix(strings.TrimPrefix(name, head), "-requests"); ok && agent != "" {
				agents = append(agents, agent)
			}
		}
	}
	slices.Sort(agents)
	return agents, nil
}
