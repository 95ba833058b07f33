// Package operator is what the sasctl CLI and the web console do against a
// deployment (AWS, LocalStack or a local emulator): submit orders, send an
// order an event, show an order's status and timeline, list and count orders
// by state, resubmit and cancel an order, and redrive a dead-letter queue.
// Its views (Status, Order, Record and the commands' results) are the one
// JSON shape sasctl prints, described by OutputSchema.
package operator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Operator acts on one deployment.
type Operator struct {
	Store    *statestore.Store
	Flow     flow.Store    // the agents' flow control: pauses and back-offs
	Lines    keyline.Store // the agents' key lines: their keys in use
	Topology topology.Topology
	// PickupTimeout is a resubmitted step's pickup deadline, for an order
	// stored before its workflow's was kept.
	PickupTimeout time.Duration
	// Workflows are the deployment's workflows, when known (sasctl
	// --workflows): Submit checks each order against its workflow's schema
	// too, as Submission does. None: its envelope only.
	Workflows workflow.Set
	// PayloadBucket is the deployment's payload bucket, where Submit keeps
	// an order, and Signal an event, too large for SQS, and DecideHeld a
	// skip's result over the inline limit, when the order's own claim
	// checks name none (they name the bucket its payloads are in, which
	// those writes use): the stack's output PayloadBucketName; by default
	// the local stack's, topology.Topology.PayloadBucket ("": none known,
	// and such a write is refused with ErrNoPayloadBucket).
	PayloadBucket string
	Now           func() time.Time

	sqs  *sqs.Client
	db   keyname.Querier // the state table's, for the search secrets (nil: none)
	s3   kept.S3
	kept *kept.Boundary // no bucket: seals and opens with the operator's own credentials
	mu   sync.Mutex
	urls map[string]string
	// found are the agents the deployment's queues name (agents), when
	// Topology names none: nil until looked up.
	found []string
	// metrics counts the ends o's writes make, written to metricsTo after
	// each action (WithMetrics; nil: none).
	metrics   *metrics.Emitter
	metricsTo io.Writer
}

// New returns an operator for the deployment the topology describes, told
// no retention (WithRetention tells it the deployment's): an order stored
// before orders kept their own that its writes end gets no expiry, and one
// they put to work again has the expiries it has pushed out past its new
// work (statestore.Store.WithRetention), never one sooner than its
// deployment's.
func New(c *awsclient.Clients, t topology.Topology) *Operator {
	return &Operator{
		Store:         statestore.New(c.DynamoDB, t.OrdersTable(), t.StateTable(), t.DeadlineShards),
		Flow:          flow.NewStore(c.DynamoDB, t.StateTable()),
		Lines:         keyline.NewStore(c.DynamoDB, t.StateTable()),
		Topology:      t,
		PickupTimeout: workflow.DefaultPickupTimeout,
		PayloadBucket: t.PayloadBucket(),
		Now:           time.Now,
		sqs:           c.SQS,
		db:            c.DynamoDB,
		s3:            c.S3,
		kept:          kept.New(nil, kept.Sealer(c.KMS, "")),
		urls:          map[string]string{},
	}
}

// WithRetention tells o the deployment's retention (its retentionDays; 0:
// forever, as the deployment's 0), as topology.Topology.DeadlineShards
// tells it its shards: an order stored before orders kept their own
// retention (statestore.Store.WithRetention) and ended, or put to work
// again, by o's writes is kept as long as the deployment's writes keep
// one. An order that kept its own is kept as long as it says, whatever
// this is. It returns o.
func (o *Operator) WithRetention(d time.Duration) *Operator {
	o.Store.WithRetention(d)
	return o
}

// agents are the deployment's agents: Topology.Agents, or if it names none
// the deployment's queues say (FindAgents, once). Topology is not written:
// the actions of one operator run at once (a client's, the console's).
func (o *Operator) agents(ctx context.Context) ([]string, error) {
	if len(o.Topology.Agents) > 0 {
		return o.Topology.Agents, nil
	}
	o.mu.Lock()
	found := o.found
	o.mu.Unlock()
	if found != nil {
		return found, nil
	}
	found, err := o.FindAgents(ctx)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.found = append([]string{}, found...) // not nil: found, if none
	return o.found, nil
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
		d, err := queue.NewSender(o.sqs).Depth(ctx, url)
		if err != nil {
			return nil, err
		}
		out[name] = d.Visible
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
	return o.ResubmitBy(ctx, orderID, step, "")
}

// ResubmitBy is Resubmit for by, whom the order's history names ("": the
// operator).
func (o *Operator) ResubmitBy(ctx context.Context, orderID, step, by string) (Resubmitted, error) {
	start, err := o.restarter(ctx)
	if err != nil {
		return Resubmitted{}, err
	}
	// Its payloads first, as its items: an order at work again never
	// loses them to the bucket's expiry.
	if _, err := o.renewPayloads(ctx, orderID, workflow.Failed, workflow.CompensationFailed); err != nil {
		return Resubmitted{}, err
	}
	res, err := o.Store.ResubmitBy(ctx, orderID, step, by, o.PickupTimeout, o.Now())
	if err != nil {
		return Resubmitted{}, err
	}
	// If a request is lost, its record's pickup deadline brings the Supervisor.
	if err := start.Start(ctx, orderID, res.Ready, 0); err != nil {
		return Resubmitted{}, err
	}
	return Resubmitted{OrderID: orderID, Step: res.Step, Undo: res.Ref.Undo, Round: res.Round}, nil
}

// renewPayloads writes again every payload the order keeps in the payload
// bucket (the one its claim checks name), so that the bucket's expiry,
// counted from an object's last write, gives the order going on as long
// as its first round had; only if the order is in one of states (the
// action then refused writes nothing again: an ended order's payloads are
// not kept past its retention). It costs a read of the order's state item
// and of its orders item (and of its results, if the order is inline),
// then a list and a copy of each payload. It returns that bucket ("": the
// order keeps nothing there, or is in none of states).
func (o *Operator) renewPayloads(ctx context.Context, orderID string, states ...workflow.State) (string, error) {
	task, _, err := o.Store.Load(ctx, orderID)
	if err != nil || !slices.Contains(states, task.State) {
		return "", err
	}
	bucket, err := o.payloadBucket(ctx, orderID, task.Round)
	if err != nil || bucket == "" || o.s3 == nil {
		return bucket, err
	}
	if _, err = o.kept.Over(o.s3, bucket).Renew(ctx, orderID); err != nil {
		return "", fmt.Errorf("write order %s's payloads again, so that they outlive it (it takes s3:ListBucket on %s, "+
			"and s3:GetObject and s3:PutObject on its orders/*): %w", orderID, bucket, err)
	}
	return bucket, nil
}

// ErrNoPayloadBucket means a payload over the inline limit (an order or an
// event over SQS's 256 KiB, a skip's result) has no bucket to go to: the
// order keeps nothing in one its claim checks would name, and the
// operator was told none (on AWS the stack's bucket has a name
// CloudFormation makes). Nothing was written or sent.
var ErrNoPayloadBucket = errors.New("no payload bucket known: set --payload-bucket (or $SAS_PAYLOAD_BUCKET; " +
	"the typed client: Options.PayloadBucket) to the stack's output PayloadBucketName")

// keep is a skip's result as its order's records keep it, as a step's is:
// sealed under its order's data key if its order (stored) is sealed, and
// over the inline limit kept in the bucket the order's claim checks name,
// which is its deployment's whatever this operator was told (else
// PayloadBucket): a payload in another would be refused by every reader of
// the order.
func (o *Operator) keep(ctx context.Context, orderID, bucket, what string, body []byte, stored kept.Value) (json.RawMessage, error) {
	bucket = cmp.Or(bucket, o.PayloadBucket)
	k := o.kept.Over(o.s3, bucket)
	sealed, err := k.Seal(ctx, orderID, stored, body)
	if err != nil {
		return nil, fmt.Errorf("seal the result for %s (it takes kms:Decrypt on the deployment's key): %w", orderID, err)
	}
	v, err := k.Offload(ctx, orderID, what, sealed)
	if errors.Is(err, kept.ErrNoBucket) { // over the inline limit as it travels, or sealed in the object form
		return nil, fmt.Errorf("keep %s's %s (%d bytes, over the %d kept inline): %w", orderID, what, sealed.Len(), k.Inline(), ErrNoPayloadBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("keep %s's %s in %s: %w", orderID, what, bucket, err)
	}
	return v.JSON(), nil
}

// payloadBucket is the bucket an order's claim checks name: its order's,
// or a result's of its round ("": none).
func (o *Operator) payloadBucket(ctx context.Context, orderID string, round int) (string, error) {
	stored, err := o.Store.Order(ctx, orderID)
	if err != nil {
		return "", err
	}
	if b := kept.Stored([]byte(stored)).Bucket(); b != "" {
		return b, nil
	}
	results, err := o.Store.Results(ctx, orderID, round)
	if err != nil {
		return "", err
	}
	for _, r := range results {
		if b := kept.Stored(r.JSON).Bucket(); b != "" {
			return b, nil
		}
	}
	return "", nil
}

// restarter starts records straight at their Agents (a wait or a timer
// through the Scheduler), as the Supervisor does: the one route.
func (o *Operator) restarter(ctx context.Context) (dispatch.Restarter, error) {
	r := dispatch.Restarter{Records: o.Store, AgentQueues: map[string]string{}, Send: queue.NewSender(o.sqs)}
	agents, err := o.agents(ctx)
	if err != nil {
		return r, err
	}
	if r.SchedulerQueueURL, err = o.QueueURL(ctx, o.Topology.SchedulerQueue().Name); err != nil {
		return r, err
	}
	for _, a := range agents {
		if r.AgentQueues[a], err = o.QueueURL(ctx, o.Topology.AgentRequests(a).Name); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Cancelled says what a cancel did.
type Cancelled struct {
	OrderID string         `json:"orderId"`
	State   workflow.State `json:"state"` // the order's, after the cancel
	// What is what happens now, in words.
	What string `json:"what"`
}

// Cancel cancels an order (statestore.Store.Cancel) for by: a ready step
// does not run and the completed steps are undone (the first undo action's
// message goes to the Scheduler), or the running step's outcome is awaited
// and then undone; the order's caller is told. A refusal is a
// *statestore.NotCancellableError with the reason.
func (o *Operator) Cancel(ctx context.Context, orderID, by, reason string) (Cancelled, error) {
	start, err := o.restarter(ctx)
	if err != nil {
		return Cancelled{}, err
	}
	// The reply queue was checked against the deployment's list when the
	// order was accepted: the one the order names is allowed.
	k := outcome.Canceller{Store: o.Store, Start: start, Notify: notify.New(queue.NewSender(o.sqs), notify.Stored{}, nil,
		slog.New(slog.DiscardHandler)), Slots: dispatch.Slots{Store: o.Lines, AgentQueues: start.AgentQueues, Send: start.Send}}
	res, err := k.Cancel(ctx, statestore.CancelRequest{OrderID: orderID, By: by, Reason: reason, Pickup: o.PickupTimeout, Now: o.Now()})
	o.flushMetrics(ctx) // an end it wrote, even if what followed failed
	if err != nil {
		return Cancelled{}, err
	}
	return Cancelled{OrderID: orderID, State: res.State, What: cancelWhat(res)}, nil
}

// cancelWhat says in words what a cancel does now.
func cancelWhat(res statestore.Cancellation) string {
	switch {
	case res.Verdict == workflow.CancelRepeated:
		return "its cancellation was asked before: nothing more to do"
	case res.Verdict == workflow.CancelCompensates:
		return "it is already undoing its work after a failure; it will end Failed"
	case res.Verdict == workflow.CancelAwaits:
		return "a step is running: its outcome is awaited, then the completed steps are undone and it ends Cancelled"
	}
	stops := "nothing more runs" // a held order: its step failed, none is ready
	if res.Stopped != "" {
		stops = fmt.Sprintf("step %s will not run", res.Stopped)
	}
	if res.State == workflow.Cancelled {
		return stops + "; nothing completed has anything to undo: it ended Cancelled"
	}
	return stops + "; the completed steps are being undone, then it ends Cancelled"
}

// ResultNotJSON is why a skip's result is refused when it is not JSON with
// one meaning in UTF-8 (message.ValidJSON), as a service's answer is kept.
const ResultNotJSON = "its result is not JSON with one meaning (valid UTF-8, no member twice)"

// DecideHeld takes an operator's decision on a held order (outcome.Holds):
// retry its held step, skip it with a result, or undo the order; then sends
// the requests of what the decision made ready and tells the order's caller
// if it ended. A decision the order cannot take is a *workflow.HeldError
// with the reason.
func (o *Operator) DecideHeld(ctx context.Context, d outcome.HoldDecision) (outcome.HoldDecided, error) {
	if len(d.Result) > 0 && !message.ValidJSON(d.Result) {
		// As an Agent keeps a service's answer: JSON with one meaning, in
		// UTF-8 (a byte that is not would be kept as U+FFFD, other data
		// than the one weighed; a member twice, read two ways).
		return outcome.HoldDecided{}, &workflow.HeldError{Reason: ResultNotJSON}
	}
	if kept.Own(d.Result) {
		// A claim check or sealed data the product did not make would be
		// read back (or opened) by the steps after it, and name the bucket
		// the operator's next writes of the order go to: refused, as a
		// service's answer or an event's data in that form is.
		return outcome.HoldDecided{}, &workflow.HeldError{Reason: fmt.Sprintf("the result is in the product's own form (%s or %s): not a result",
			kept.CheckMember, kept.SealedMember)}
	}
	start, err := o.restarter(ctx)
	if err != nil {
		return outcome.HoldDecided{}, err
	}
	// Its payloads first, as a resubmission's: a hold stops the order's
	// deadline, not the bucket's expiry, which counts days from an
	// object's last write (stack.PayloadExpiryDays counts one hold: the
	// one the Supervisor ends).
	bucket, err := o.renewPayloads(ctx, d.OrderID, workflow.Held)
	if err != nil {
		return outcome.HoldDecided{}, err
	}
	if d.Now.IsZero() {
		d.Now = o.Now()
	}
	if len(d.Result) > 0 { // a skip's result: sealed under its order's data key, as its steps' are
		stored, err := o.Store.Order(ctx, d.OrderID)
		if err != nil {
			return outcome.HoldDecided{}, err
		}
		given := len(d.Result)
		if d.Result, err = o.keep(ctx, d.OrderID, bucket, "results/skip", d.Result, kept.Stored([]byte(stored))); err != nil {
			return outcome.HoldDecided{}, err
		}
		d.ResultBytes = given
	}
	h := outcome.Holds{Store: o.Store, Start: start, Pickup: o.PickupTimeout,
		Notify: notify.New(queue.NewSender(o.sqs), notify.Stored{}, nil, slog.New(slog.DiscardHandler))}
	defer o.flushMetrics(ctx) // an end it wrote, even if what followed failed
	return h.Decide(ctx, d)
}
