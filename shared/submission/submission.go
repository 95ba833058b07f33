// Package submission is the Submission handler: it validates orders from the
// orders queue, stores each with its task and step records in one
// transaction, and sends the first step's request to its Agent (the
// Scheduler's dispatch, done where the order is stored: one hop less).
package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/searchkey"
	"github.com/sas-go/sas/shared/sqsbatch"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/tracing"
	"github.com/sas-go/sas/shared/workflow"
)

// Store is the part of the state store Submission uses: orders, cancels,
// events (recorded like outcomes), and the start of a first step that waits.
type Store interface {
	Submit(ctx context.Context, sub statestore.Submission) (bool, error)
	outcome.Store
	outcome.StartStore
	dispatch.DefinitionReader
	dispatch.RecordReader // a cancel's first undo
	// Definition is the definition an order runs now.
	Definition(ctx context.Context, orderID string) (workflow.Definition, error)
	// WasSent reports whether body is the order as first accepted, its
	// data rewritten since by a move.
	WasSent(ctx context.Context, orderID, body string) (bool, error)
}

// Sender sends queue messages.
type Sender interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
	Reject(ctx context.Context, dlqURL, body, source, reason string) error
}

// Config is what Submission needs to know of its deployment.
type Config struct {
	Workflows          workflow.Set      // an order names one of these, or runs the first
	AgentQueues        map[string]string // agent name → its request queue URL
	SchedulerQueueURL  string            // where an event's recorded outcome goes, for the Scheduler to follow
	DLQURL             string            // the orders queue's DLQ, for rejected orders
	QueueURL           string            // the orders queue: a cancel ahead of its order is hidden there a while
	EventsQueueURL     string            // the events queue: an event ahead of its order is hidden there a while
	EventsDLQURL       string            // the events queue's DLQ, for refused events
	AllowedReplyQueues notify.Allowed    // URL prefixes an order's replyQueue may start with
	// OpenOnly makes the Sealer open only: the deployment's sealData was
	// turned off, its key kept. What was sealed before is opened, and what
	// is made of a sealed order (its events' data) sealed under its data
	// key; no new order is sealed, a sender's offloaded body may be
	// anywhere in the bucket and is not written over.
	OpenOnly bool
}

// sealsNew reports whether the deployment seals new orders (sealData on):
// each order's data under a data key of its own, a refusal quoting none of
// it, and a sender's offloaded body taken from under incoming/ only, and
// written over once taken. (A sealer open only opens what was sealed
// before, and seals what is made of it: h.kept.Seals().)
func (h *Handler) sealsNew() bool { return h.kept.Seals() && !h.cfg.OpenOnly }

// Handler is the Submission Lambda handler.
type Handler struct {
	cfg      Config
	store    Store
	send     Sender
	notify   *notify.Notifier
	metrics  *metrics.Emitter
	log      *slog.Logger
	batch    *sqsbatch.Processor
	events   *sqsbatch.Processor // the events queue's batches
	dispatch dispatch.Dispatcher
	catalog  *dispatch.Catalog
	slots    SlotReleaser
	kept     *kept.Boundary
	offload  *offload.Store
	budget   *kept.Budget
	// searchNames names searchable values in a sealing deployment (Deps.SearchNames).
	searchNames searchkey.Namer
	large       sync.Mutex // one body by pointer at a time
	Now         func() time.Time
	// Crash, if set, is called at each crash point (after a write, before the
	// send that follows it); a chaos test makes it panic there, as a killed
	// invocation would stop. Nil in production.
	Crash func(point string)
}

// Deps are what Submission calls.
type Deps struct {
	Store   Store
	Send    Sender
	Notify  *notify.Notifier
	Metrics *metrics.Emitter
	Log     *slog.Logger
	// Slots lets go the slot of an agent's calls in flight that an async
	// attempt held, when its callback is recorded (nil: they end at the
	// attempt's CompleteBy).
	Slots SlotReleaser
	// Kept keeps an order and its events' data: sealed under a data key of
	// the order's own (if it seals), and over the inline limit in the
	// payload bucket (nil: none sealed, every order inline, at most
	// kept.MaxInline).
	Kept *kept.Boundary
	// Offload reads the bodies SQS Extended Client pointers name, in the
	// payload bucket, and writes a sealed one's over once taken (nil: no
	// bucket, no pointer followed).
	Offload *offload.Store
	// Budget bounds the payload bytes the timers' until documents it reads
	// hold at once (nil: none).
	Budget *kept.Budget
	// SearchNames names the values of the orders' searchable fields in a
	// deployment that seals its orders' data (searchkey.NewNamer); nil:
	// kept as they are, and a sealing deployment refuses to keep any.
	SearchNames searchkey.Namer
}

// SlotReleaser lets go a slot of an agent's calls in flight (keyline.Store),
// and says which waiters it was handed to.
type SlotReleaser interface {
	Release(ctx context.Context, agent, key, holder string, now time.Time) ([]keyline.Waiter, error)
	Pass(ctx context.Context, agent, key, holder, waiterID string, until, now time.Time) ([]keyline.Waiter, error)
}

// slotsOf lets go the slots of the agents' calls in flight that ended here
// (an async call's callback, a cancel), handing them on (nil: none).
func (h *Handler) slotsOf() outcome.SlotLetter {
	if h.slots == nil {
		return nil
	}
	return dispatch.Slots{Store: h.slots, AgentQueues: h.cfg.AgentQueues, Send: h.send}
}

// New builds the handler; it fails if an agent of the workflows has no queue.
func New(cfg Config, d Deps) (*Handler, error) {
	if cfg.Workflows.IsZero() {
		return nil, fmt.Errorf("submission: no workflow")
	}
	disp := dispatch.Dispatcher{AgentQueues: cfg.AgentQueues, Send: d.Send}
	if err := disp.Check(cfg.Workflows); err != nil {
		return nil, fmt.Errorf("submission: %w", err)
	}
	processor := func(dlq, queue string) *sqsbatch.Processor {
		return &sqsbatch.Processor{Name: "submission", DLQURL: dlq, Rejecter: d.Send, Metrics: d.Metrics,
			Log: d.Log, Buffer: sqsbatch.BufferingOf(d.Send), OnceAtEnd: true, Hider: hiderOf(d.Send), QueueURL: queue}
	}
	return &Handler{cfg: cfg, store: d.Store, send: d.Send, notify: d.Notify, metrics: d.Metrics, log: d.Log, slots: d.Slots, kept: d.Kept, offload: d.Offload, budget: d.Budget,
		searchNames: d.SearchNames, Now: time.Now, dispatch: disp, catalog: &dispatch.Catalog{Workflows: cfg.Workflows, Store: d.Store},
		batch: processor(cfg.DLQURL, cfg.QueueURL), events: processor(cfg.EventsDLQURL, cfg.EventsQueueURL)}, nil
}

// hiderOf is send as a sqsbatch.Hider if it can hide a message, else nil.
func hiderOf(send Sender) sqsbatch.Hider {
	h, _ := send.(sqsbatch.Hider)
	return h
}

// Handle processes a batch from the orders queue, or from the events queue
// (a batch comes from one queue: its records name it).
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if len(ev.Records) > 0 && h.cfg.EventsQueueURL != "" && queueName(ev.Records[0].EventSourceARN) == queueName(h.cfg.EventsQueueURL) {
		return h.events.Handle(ctx, ev, h.eventRecord), nil
	}
	return h.batch.Handle(ctx, ev, h.record), nil
}

// queueName is the last part of a queue's ARN or URL: its name.
func queueName(arnOrURL string) string {
	return arnOrURL[strings.LastIndexAny(arnOrURL, ":/")+1:]
}

func (h *Handler) record(ctx context.Context, rec events.SQSMessage) error {
	if _, _, ok := offload.Pointer(rec.Body); ok {
		// A body of up to 16 MB, copied a few times while it is checked,
		// sealed and kept: one at a time per instance, where a batch's
		// records run at once.
		h.large.Lock()
		defer h.large.Unlock()
	}
	m, err := h.decode(ctx, rec)
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case message.Cancel:
		return h.cancel(ctx, rec, m)
	case message.Event:
		if h.cfg.EventsQueueURL != "" {
			h.log.Warn("an event on the orders queue: send events and callbacks to the events queue; "+
				"the orders queue takes them until the next version", "order_id", m.OrderID, "event", m.Event, "events_queue", h.cfg.EventsQueueURL)
		}
		return h.event(ctx, rec, m)
	}
	o := m.(message.Order)
	stored, err := h.accept(ctx, o)
	if err != nil {
		return err
	}
	h.reseal(ctx, rec, o.OrderID, stored)
	return nil
}

// reseal writes a sealed order sent by pointer, as it is stored, over the
// clear body its sender offloaded under incoming/ (offload.Store.Reseal),
// once it is taken: the bucket keeps no clear copy of it (it expired after
// 15 days before). If the pointer message comes again, body reads the
// order back from what is there. An event's is resealed by resealEvent.
// (Sealing new orders, body took a pointer under incoming/ only: sendersKey.)
func (h *Handler) reseal(ctx context.Context, rec events.SQSMessage, orderID, stored string) {
	_, key, ok := offload.Pointer(rec.Body)
	if !ok || !h.sealsNew() {
		return
	}
	if err := h.offload.Reseal(ctx, key, []byte(stored)); err != nil {
		// The order is taken: its message is done all the same, and the
		// clear body expires with incoming/'s lifecycle (15 days).
		h.log.Warn(NotResealed, "order_id", orderID, "key", key, "err", err)
	}
}

// NotResealed is what Submission logs when it could not write over the
// clear body a sender offloaded of a sealed deployment's order or event
// it took: the body expires with incoming/'s lifecycle.
const NotResealed = "an offloaded body not resealed: it expires with incoming/'s lifecycle"

// body is the message's body, or, for an SQS Extended Client pointer
// message, the body it kept in S3. A pointer whose object is gone or too
// large is refused (to the DLQ, with the reason: the pointer is kept
// there); one this deployment may not read is an error SQS retries, then
// moves to the DLQ.
func (h *Handler) body(ctx context.Context, rec events.SQSMessage) (string, error) {
	bucket, key, ok := offload.Pointer(rec.Body)
	if !ok {
		return rec.Body, nil
	}
	if bucket != h.offload.Bucket() {
		return "", message.Invalid("an SQS Extended Client message names bucket %q: send large orders to this deployment's payload bucket (PayloadBucketName)", bucket)
	}
	if err := h.sendersKey(key); err != nil {
		return "", err
	}
	b, err := h.offload.Fetch(ctx, bucket, key, max(message.MaxOrderBytes, message.MaxEventBytes))
	var lost *offload.Error
	if errors.As(err, &lost) {
		return "", message.Invalid("an SQS Extended Client message: %v", err)
	}
	if err != nil {
		return "", err
	}
	// A body written over once taken (reseal) is the order it holds, its
	// pointer message come again.
	b, err = h.kept.Resealed(ctx, b)
	switch {
	case errors.Is(err, kept.ErrUnnamed):
		return "", message.Invalid("an SQS Extended Client message: %v", err)
	case kept.Broken(err):
		return "", message.Invalid("an SQS Extended Client message: its sealed body: %v", err)
	case err != nil:
		return "", err
	}
	return string(b), nil
}

// sendersKey refuses a pointer to an object no sender offloads: the
// product's own payloads (under orders/, which no sender may write), and,
// in a deployment that seals data, any outside incoming/: Submission
// writes over a sender's body once it takes its order or event there only
// (reseal, resealEvent), so one elsewhere would stay in clear, and the
// refusal tells its sender at once. (The Python Extended Client's default
// key is a UUID at the bucket's root; its S3Key message attribute names
// another.)
func (h *Handler) sendersKey(key string) error {
	if strings.HasPrefix(key, offload.OrdersPrefix) {
		return message.Invalid("an SQS Extended Client message names %s, one of this deployment's own payloads: senders offload under %s", key, offload.IncomingPrefix)
	}
	if h.sealsNew() && !offload.Incoming(key) {
		return message.Invalid("an SQS Extended Client message names %[1]s, outside %[2]s: this deployment seals data, and, once it takes a body, "+
			"writes over it only under %[2]s, so that the bucket keeps no clear copy; offload under %[2]s "+
			"(Java: withS3KeyPrefix(\"%[2]s\"); Python: the message attribute S3Key, \"%[2]s\" and a UUID)", key, offload.IncomingPrefix)
	}
	return nil
}

// decode is rec's message (an order, a cancel, an event), from its body
// (read from the bucket if rec is a sender's pointer to it).
func (h *Handler) decode(ctx context.Context, rec events.SQSMessage) (any, error) {
	body, err := h.body(ctx, rec)
	if err != nil {
		return nil, err
	}
	return message.DecodeOrdersMessage(body, h.cfg.Workflows) // an order's id: the member its workflow names
}

// eventRecord is a record of the events queue: an event, or a callback.
func (h *Handler) eventRecord(ctx context.Context, rec events.SQSMessage) error {
	if _, _, ok := offload.Pointer(rec.Body); ok {
		h.large.Lock() // as an order's (record)
		defer h.large.Unlock()
	}
	m, err := h.decode(ctx, rec)
	if err != nil {
		return err
	}
	e, ok := m.(message.Event)
	if !ok {
		return message.Invalid("the events queue takes events only ({\"kind\":\"event\",...}): send orders and cancels to the orders queue")
	}
	return h.event(ctx, rec, e)
}

// accept takes order o: stored and started, or, a duplicate, started again.
// It returns the order as it is stored (its claim check, sealed).
func (h *Handler) accept(ctx context.Context, o message.Order) (string, error) {
	if o.ReplyQueue != "" {
		if err := h.cfg.AllowedReplyQueues.Check(o.ReplyQueue); err != nil {
			return "", message.Invalid("order %s: %v", o.OrderID, err)
		}
	}
	def, err := h.definition(ctx, o)
	if err != nil {
		return "", err
	}
	whole := o.JSON()
	now := h.Now()
	items, err := def.Admit(json.RawMessage(whole), now)
	if err != nil {
		// Logged, counted, traced and put on the DLQ message in clear: of a
		// deployment that seals the orders' data, it quotes none of it.
		why := err.Error()
		if h.sealsNew() {
			why = workflow.Unquoted(err)
		}
		return "", message.Invalid("order %s: %s", o.OrderID, why)
	}
	search, err := h.searchable(ctx, def, whole)
	if err != nil {
		return "", err
	}
	body, err := h.keep(ctx, o)
	if err != nil {
		return "", err
	}
	created, err := h.store.Submit(ctx, statestore.Submission{
		OrderID: o.OrderID, Order: body, Sealed: h.sealsNew(), ReplyQueue: o.ReplyQueue, Workflow: def, Items: items,
		Search: search, Now: now, Trace: tracing.Context(ctx)})
	if err != nil {
		return "", err
	}
	stored := body
	crash(h.Crash, "submission.after-commit")
	if created {
		h.metrics.Count(metrics.OrdersAccepted, 1, map[string]any{"OrderID": o.OrderID})
		h.log.Debug("order accepted", "order_id", o.OrderID) // every order: its metric counts it
		h.notify.Post(ctx, notify.Event{OrderID: o.OrderID, ReplyQueue: o.ReplyQueue, Round: 1,
			Event: workflow.EventReceived, State: workflow.Pending, At: now})
	} else if stored, err = h.sameAsStored(ctx, o, now); err != nil {
		return "", err
	} else {
		// Send the first step's request again all the same: if the first
		// delivery died between its transaction and this send, this finishes
		// its work. A claim is conditional, so an extra request runs nothing.
		h.metrics.Count(metrics.DuplicateOrders, 1, map[string]any{"OrderID": o.OrderID})
		h.log.Info("duplicate order ignored", "order_id", o.OrderID)
		// It runs the definition it was accepted with, whatever runs now.
		if def, err = h.store.Definition(ctx, o.OrderID); err != nil {
			return "", err
		}
		if items, err = def.Items(json.RawMessage(whole)); err != nil {
			return "", message.Invalid("order %s cannot run workflow %s: %v", o.OrderID, def.Name, err)
		}
	}
	// The first step (or the steps that need nothing): its request to its
	// Agent, or, a wait or a timer, armed.
	starter := outcome.Starter{Dispatch: h.dispatch, Store: h.store, Recorder: outcome.Recorder{Store: h.store}, Now: h.Now, Log: h.log,
		Budget: h.budget, Kept: h.kept}
	// The order as stored, a duplicate's too: not the form this delivery
	// kept (another data key, another object, sealed or not as the
	// deployment seals now), which its steps would read for it.
	done, err := starter.Start(ctx, def, o.OrderID, def.Starts(items), json.RawMessage(stored))
	for _, c := range done { // a timer at once, or a kept event: the Scheduler follows it
		if err := h.follow(ctx, def, outcome.Attempt{OrderID: o.OrderID, Ref: c.Ref, Name: c.Name}, c.Recorded, nil); err != nil {
			return "", err
		}
	}
	return stored, err
}

// searchable are the order's values of its workflow's searchable fields as
// the index keeps them: named under the search secret in a deployment that
// seals new orders' data (never in clear there: with no namer, an error the
// delivery is tried again for), else as they are.
func (h *Handler) searchable(ctx context.Context, def workflow.Definition, whole string) (map[string]string, error) {
	if len(def.Search) == 0 {
		return nil, nil
	}
	var names searchkey.Namer
	if h.sealsNew() {
		if h.searchNames == nil {
			return nil, errors.New("submission: a deployment that seals its orders' data has no namer for their searchable fields")
		}
		names = h.searchNames
	}
	return searchkey.Names(ctx, def, json.RawMessage(whole), names)
}

// keep is the order as stored and sent on: itself, or sealed under a data
// key of its own (with a Sealer), and, over the inline limit, its claim
// check, the order kept in the payload bucket first; its id (as the
// product's own member orderId, whatever its workflow's id field),
// workflow and replyQueue beside it in clear, and a sealed order's data key
// in its claim check's head.
func (h *Handler) keep(ctx context.Context, o message.Order) (string, error) {
	head := map[string]string{"orderId": o.OrderID, "workflow": o.Workflow, "replyQueue": o.ReplyQueue}
	body := kept.Unsealed([]byte(o.JSON()), head)
	if h.sealsNew() {
		var err error
		if body, err = h.kept.SealOrder(ctx, o.OrderID, []byte(o.JSON()), head); err != nil {
			return "", err
		}
	}
	if body.Len() > h.kept.Max() {
		return "", message.Invalid("order %s is %d bytes, over the %d a deployment without a payload bucket takes (payloadBucket)",
			o.OrderID, body.Len(), h.kept.Max())
	}
	v, err := h.kept.Offload(ctx, o.OrderID, "order", body)
	return string(v.JSON()), err
}

// definition is the workflow an order names (none: the default). A name
// this deployment does not run is refused, unless the order was accepted
// before it stopped running it: then a resend runs what it started with.
func (h *Handler) definition(ctx context.Context, o message.Order) (workflow.Definition, error) {
	def, notRun := h.cfg.Workflows.Lookup(o.Workflow)
	if notRun == nil {
		return def, nil
	}
	def, err := h.store.Definition(ctx, o.OrderID)
	if errors.Is(err, statestore.ErrNotFound) {
		return def, message.Invalid("order %s: %v", o.OrderID, notRun)
	}
	return def, err
}

// sameAsStored checks that a resent OrderID carries the content first
// accepted: a resend with other content is a conflict, rejected to the DLQ
// with the reason, counted, and its sender told (never dropped in silence).
// It returns the order as stored.
func (h *Handler) sameAsStored(ctx context.Context, o message.Order, now time.Time) (string, error) {
	stored, err := h.store.Order(ctx, o.OrderID)
	if err != nil {
		return "", err
	}
	if same, err := h.kept.Same(ctx, o.OrderID, kept.Stored([]byte(stored)), o.JSON()); err != nil || same {
		return stored, err
	}
	if sent, err := h.store.WasSent(ctx, o.OrderID, o.JSON()); err != nil || sent {
		return stored, err
	}
	reason := fmt.Sprintf("%s %s was already accepted with different content", o.IDField, o.OrderID)
	h.metrics.Count(metrics.ConflictingOrders, 1, map[string]any{"OrderID": o.OrderID})
	if o.ReplyQueue != "" {
		h.notify.Post(ctx, notify.Event{OrderID: o.OrderID, ReplyQueue: o.ReplyQueue, Round: 1,
			Event: workflow.EventRejected, Error: reason, At: now})
	}
	return "", message.Invalid("%s", reason)
}

func crash(f func(string), point string) {
	if f != nil {
		f(point)
	}
}
