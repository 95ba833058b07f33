// Package client is the typed Go client of a deployment, for the
// applications that submit orders and send them events, and for the tools
// that watch them: submit, signal, cancel, status, list and find (Find: a
// Search by state, workflow, version, step, agent, reason, age, end time or
// a searchable field), with the decisions on a held order; and the same
// actions on many orders at once (RetryMany, SkipMany, UndoMany,
// CancelMany, ResubmitMany: by ids or a Search, a dry run first, paced,
// ending with a report). It is the code sasctl runs (through the same
// shared/operator), so an application sees what an operator sees.
//
// Its errors are typed: ErrNotFound for an order that is not stored, a
// *RejectedError for an order the pipeline would refuse (nothing sent), a
// *NotCancellableError, a *HeldError, ErrBadEvent for an event that
// cannot be sent, and ErrNoSelection for a bulk action that names no
// orders. A bulk action refuses no order by an error: its report says
// which it refused and why.
//
// It needs the deployment's AWS credentials: SQS SendMessage on the orders
// and events queues, and, for cancel, resubmit and the held-order
// decisions (one at a time or many), on the scheduler's and the agents'
// request queues, which it finds (ListQueues, GetQueueUrl); DynamoDB reads
// of the state table (status, list, find), and its writes for those
// actions; for an order with payloads in the payload
// bucket, a held-order decision writes them again (s3:ListBucket on the
// bucket, s3:GetObject and s3:PutObject on its orders/*), and an order or
// event over 256 KiB is offloaded under its incoming/ (s3:PutObject
// there).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// ErrNotFound means the order is not stored: it does not exist, has
// expired from the state table, or (just submitted) is not stored yet.
var ErrNotFound = statestore.ErrNotFound

// ErrBadEvent wraps why an event cannot be sent (a bad name, id or data):
// nothing was sent.
var ErrBadEvent = operator.ErrBadSignal

// NotCancellableError says why an order cannot be cancelled (it ended, or
// a step that cannot be undone has run).
type NotCancellableError = statestore.NotCancellableError

// HeldError says why a decision on a held order cannot be taken (it is not
// held, or the step named does not hold it).
type HeldError = workflow.HeldError

// RejectedError is an order the pipeline would refuse, and why: nothing
// was sent.
type RejectedError struct {
	OrderID string // "" if the body has none
	Reason  string
}

func (e *RejectedError) Error() string {
	if e.OrderID == "" {
		return "order rejected: " + e.Reason
	}
	return fmt.Sprintf("order %s rejected: %s", e.OrderID, e.Reason)
}

// Options say which deployment to reach.
type Options struct {
	// Prefix is the deployment's name (cdk deploy's prefix; default sas).
	Prefix string
	// Endpoint, for an emulator (sasctl dev, LocalStack): its URL; "" for
	// AWS (the SDK's own configuration: credentials, region, AWS_ENDPOINT_URL).
	Endpoint string
	// DeadlineShards is the deployment's deadlineShards (default 4, a
	// deployment's own default). Each order keeps the shard Submission
	// picked for it whatever this says (one stored before orders kept
	// theirs goes to shard 0, which every deployment sweeps).
	DeadlineShards int
	// Workflows are the deployment's workflows, if the application has
	// them: Submit checks each order against its workflow's schema too, as
	// Submission does, and reads its id by the member its workflow names
	// (a workflow's id:, applicationId). None: the order's envelope only,
	// its id read as its orderId (an order of a workflow that names
	// another id field is refused saying so; one that also carries an
	// orderId as data would be taken for that order: give Workflows).
	Workflows workflow.Set
	// PayloadBucket is the deployment's payload bucket (the stack's output
	// PayloadBucketName): Submit keeps an order, and Signal an event, over
	// SQS's 256 KiB there and sends a pointer to it, as the SQS Extended
	// Client does, and Skip a result over the inline limit, for an order
	// that keeps nothing there yet (one that does keeps it in the bucket
	// its claim checks name). Default: against an emulator (Endpoint, or
	// AWS_ENDPOINT_URL), the local stack's; against AWS none (the stack's
	// bucket has a name CloudFormation makes): what needs it is then
	// refused, nothing sent, and the error says to set it.
	PayloadBucket string
	// RetentionDays is the deployment's retentionDays (0: kept forever, as
	// the deployment's 0): an order stored before orders kept their own
	// retention, ended by Cancel or a decision on a held order, or put to
	// work again, is kept as long as the deployment's own writes keep one.
	// Nil, not told: such an order ended gets no expiry, and one put to
	// work again has only the expiries it has pushed out past its new
	// work, never one sooner than its deployment would give it. An order
	// that kept its own is kept as long as it says.
	RetentionDays *int
}

// Client acts on one deployment; it is safe for concurrent use.
type Client struct{ op *operator.Operator }

// New is a client of the deployment opts names, with the AWS SDK's
// configuration.
func New(ctx context.Context, opts Options) (*Client, error) {
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: opts.Endpoint, Emulated: opts.Endpoint != ""})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if c.Config.Region == "" {
		return nil, errors.New("client: no AWS region: set AWS_REGION, or use a profile that has one")
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = topology.DefaultPrefix
	}
	if d := opts.RetentionDays; d != nil && *d < 0 {
		return nil, fmt.Errorf("client: RetentionDays %d: must not be negative (0: kept forever)", *d)
	}
	t := topology.Default(prefix) // the deployment's default shards, unless told its own
	if opts.DeadlineShards > 0 {
		t.DeadlineShards = opts.DeadlineShards
	}
	op := operator.New(c, t) // not told the retention: operator.New's
	if opts.Endpoint == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		op.ToCloudWatch(c.Config) // the ends it makes count in the stack's dashboard and alarms
	}
	if d := opts.RetentionDays; d != nil {
		op.WithRetention(time.Duration(*d) * 24 * time.Hour) // 0 is the deployment's 0, kept for ever: told, not a default
	}
	op.Workflows = opts.Workflows
	op.PayloadBucket = opts.PayloadBucket
	if op.PayloadBucket == "" && (opts.Endpoint != "" || os.Getenv("AWS_ENDPOINT_URL") != "") {
		op.PayloadBucket = t.PayloadBucket() // the local stack's
	}
	return Of(op), nil
}

// Of is a client on an operator (sasctl's).
func Of(op *operator.Operator) *Client { return &Client{op: op} }

// Submit sends one order to the orders queue: a JSON object as a string or
// []byte, or a value encoded as JSON (a shop.Order, say). An order
// Submission would refuse (without its id, not JSON, an unknown field;
// with Options.Workflows, one its workflow's schema refuses) is a
// *RejectedError and is not sent. It returns the order's id: its member
// orderId, or, with Options.Workflows, the member its workflow names (id:
// applicationId), which a client not told the workflows cannot know. Submission
// takes it asynchronously: Status finds it once it is stored.
func (c *Client) Submit(ctx context.Context, order any) (string, error) {
	body, err := encode(order)
	if err != nil {
		return "", &RejectedError{Reason: err.Error()}
	}
	o, err := c.op.DecodeOrder(string(body)) // its id: the member its workflow names (Options.Workflows)
	if err != nil {
		return "", &RejectedError{Reason: strings.TrimPrefix(err.Error(), "invalid message: ")}
	}
	res, err := c.op.Submit(ctx, []string{string(body)})
	if err != nil {
		return "", err
	}
	if len(res.Rejected) > 0 {
		return "", &RejectedError{OrderID: o.OrderID, Reason: res.Rejected[0].Reason}
	}
	return o.OrderID, nil
}

// SignalOption changes what Signal does.
type SignalOption func(*signalOptions)

// signalOptions are what the SignalOptions chose.
type signalOptions struct {
	ifStored bool
}

// IfStored makes Signal send the event only to an order stored now: an
// order not stored (yet) is ErrNotFound, and nothing is sent.
func IfStored() SignalOption { return func(o *signalOptions) { o.ifStored = true } }

// Signal sends an event to an order, with data (encoded as JSON; nil:
// none) and eventID (""; one is made: sending the same id again is a
// no-op). An event that cannot be sent wraps ErrBadEvent (nothing sent).
// An order not stored yet (Submit returns before Submission stores the
// order) is sent its event all the same, as a service's event on the
// events queue is: Signalled.Ahead says so, and Submission takes the event
// once the order is stored, or, if it is not within about 10 s, refuses it
// to the events DLQ. With IfStored, such an order is ErrNotFound instead.
// What the order makes of the event (kept for its wait, or refused to the
// events DLQ) the pipeline decides. An event over SQS's 256 KiB goes by
// pointer, as Submit's orders do (Options.PayloadBucket).
func (c *Client) Signal(ctx context.Context, orderID, event string, data any, eventID string, opts ...SignalOption) (operator.Signalled, error) {
	var o signalOptions
	for _, opt := range opts {
		opt(&o)
	}
	var b json.RawMessage
	if !none(data) {
		var err error
		if b, err = encode(data); err != nil {
			return operator.Signalled{}, fmt.Errorf("%w: its data: %v", ErrBadEvent, err)
		}
	}
	return c.op.Signal(ctx, orderID, event, eventID, b, !o.ifStored)
}

// Cancel cancels an order: what has not started does not, what runs is
// awaited, what completed is undone, and it ends Cancelled. by and reason
// are kept with it. A refusal is a *NotCancellableError; a missing order
// ErrNotFound.
func (c *Client) Cancel(ctx context.Context, orderID, by, reason string) (operator.Cancelled, error) {
	return c.op.Cancel(ctx, orderID, by, reason)
}

// Status is the order, its records and its timeline (what sasctl status
// prints); ErrNotFound if it does not exist.
func (c *Client) Status(ctx context.Context, orderID string) (operator.Status, error) {
	return c.op.Status(ctx, orderID)
}

// List lists orders (in one state; "": every state), up to limit, and the
// token of the next page ("" at the end). It scans the state table.
func (c *Client) List(ctx context.Context, state workflow.State, limit int, next string) ([]operator.Order, string, error) {
	tasks, token, err := c.op.Store.SearchTasks(ctx, statestore.TaskFilter{State: state}, max(limit, 1), next)
	if err != nil {
		return nil, "", err
	}
	out := make([]operator.Order, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, operator.OrderOf(t))
	}
	return out, token, nil
}

// Retry runs the step whose failure holds a Held order again (step: its
// name, "" if one holds it), its failures forgotten.
func (c *Client) Retry(ctx context.Context, orderID, step, by string) (outcome.HoldDecided, error) {
	return c.op.DecideHeld(ctx, outcome.HoldDecision{OrderID: orderID, Action: outcome.HoldRetry, Step: step, By: by})
}

// Skip takes the step whose failure holds a Held order as done, with result
// (encoded as JSON; nil: none), and the order goes on.
func (c *Client) Skip(ctx context.Context, orderID, step string, result any, by string) (outcome.HoldDecided, error) {
	d := outcome.HoldDecision{OrderID: orderID, Action: outcome.HoldSkip, Step: step, By: by}
	if !none(result) {
		b, err := encode(result)
		if err != nil {
			return outcome.HoldDecided{}, &HeldError{Reason: "its result: " + err.Error()}
		}
		d.Result = b
	}
	return c.op.DecideHeld(ctx, d)
}

// Undo undoes a Held order now, as its step's failure would have.
func (c *Client) Undo(ctx context.Context, orderID, by string) (outcome.HoldDecided, error) {
	return c.op.DecideHeld(ctx, outcome.HoldDecision{OrderID: orderID, Action: outcome.HoldUndo, By: by})
}

// none reports whether v is no data: nil, or empty bytes (a typed nil
// json.RawMessage among them).
func none(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case json.RawMessage:
		return len(x) == 0
	case []byte:
		return len(x) == 0
	}
	return false
}

// encode is v as JSON: a string or []byte as it is (it must be JSON).
func encode(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case string:
		if !json.Valid([]byte(x)) {
			return nil, errors.New("not JSON")
		}
		return json.RawMessage(x), nil
	case []byte:
		if !json.Valid(x) {
			return nil, errors.New("not JSON")
		}
		return x, nil
	case json.RawMessage:
		if !json.Valid(x) {
			return nil, errors.New("not JSON")
		}
		return x, nil
	}
	return message.Encode(v, 0) // as the product encodes its own: nothing escaped for HTML
}
