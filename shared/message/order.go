package message

import (
	"regexp"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sas-go/sas/shared/kept"
)

// MaxOrderBytes is the largest order body accepted. One over the inline
// limit (kept.Boundary.Inline) is kept in the payload bucket and travels
// and is stored as its claim check; one over SQS's 256 KB comes by an SQS
// Extended Client pointer (offload.Pointer).
const MaxOrderBytes = kept.MaxBytes

var (
	idPattern       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)
	workflowPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
)

// Order is a task sent to the orders queue: a JSON object with its orderId
// and, optionally, the workflow that runs it and a queue for its status
// messages. Every other member is the task's data, which its steps read as
// .order, and which its workflow's schema, if the file declares one, checks
// (workflow.Definition.CheckOrder). "kind" is reserved: a message with one
// is a cancel or an event.
type Order struct {
	OrderID string
	// Workflow names the workflow that runs the order (none: the
	// deployment's default); one the deployment does not run is rejected.
	Workflow string
	// ReplyQueue, if set, is the SQS queue URL where status notifications go;
	// the deployment decides which queues may be named.
	ReplyQueue string
	body       string // the whole order, compacted
}

// productFields are the members of an order the product reads.
var productFields = []string{"orderId", "workflow", "replyQueue", "kind", kept.CheckMember, kept.SealedMember, kept.KeyMember}

// orderHead is what an order says to the product itself.
type orderHead struct {
	OrderID    *string `json:"orderId"`
	Workflow   string  `json:"workflow"`
	ReplyQueue string  `json:"replyQueue"`
}

// DecodeOrder parses and validates an order body: one JSON object, with
// one meaning (no member twice at any depth, valid UTF-8), a valid orderId,
// and a workflow and replyQueue that are names and URLs if given.
func DecodeOrder(body string) (Order, error) {
	if len(body) > MaxOrderBytes {
		return Order{}, Invalid("body is %d bytes, over the %d-byte limit of an order", len(body), MaxOrderBytes)
	}
	var h orderHead
	if err := decodeHead(body, &h); err != nil {
		return Order{}, err
	}
	if h.OrderID == nil {
		return Order{}, Invalid("an order needs an orderId")
	}
	var members map[string]jsontext.Value
	if err := decodeHead(body, &members); err != nil {
		return Order{}, err
	}
	if _, ok := members["kind"]; ok {
		return Order{}, Invalid("unknown field \"kind\": an order has no kind (a cancel is %q, an event %q)", KindCancel, KindEvent)
	}
	for _, own := range []string{kept.CheckMember, kept.SealedMember, kept.KeyMember} {
		if _, ok := members[own]; ok {
			return Order{}, Invalid("member %q is the product's own (a claim check, or sealed data, and its key): an order has none", own)
		}
	}
	for name := range members {
		for _, f := range productFields {
			if name != f && strings.EqualFold(name, f) {
				return Order{}, Invalid("member %q: %s in another case (a reader that ignores case would take it for that)", truncate(name), f)
			}
		}
	}
	v := jsontext.Value(body)
	if err := v.Compact(); err != nil {
		return Order{}, Invalid("bad JSON: %s", describe(err))
	}
	o := Order{OrderID: *h.OrderID, Workflow: h.Workflow, ReplyQueue: h.ReplyQueue, body: string(v)}
	return o, o.Validate()
}

// MaxReplyQueueBytes bounds an order's replyQueue.
const MaxReplyQueueBytes = 512

// Validate checks the members of the order the product reads.
func (o Order) Validate() error {
	if !idPattern.MatchString(o.OrderID) {
		return Invalid("orderId %q must be 1-64 letters, digits or _.:- starting with a letter or digit", truncate(o.OrderID))
	}
	if o.Workflow != "" && !workflowPattern.MatchString(o.Workflow) {
		return Invalid("order %s: workflow %q is not a workflow's name", o.OrderID, truncate(o.Workflow))
	}
	if len(o.ReplyQueue) > MaxReplyQueueBytes || strings.ContainsAny(o.ReplyQueue, " \t\n") {
		return Invalid("order %s: replyQueue is not a queue URL", o.OrderID)
	}
	return nil
}

// JSON is the order as stored and as its steps read it: the body as sent,
// compacted.
func (o Order) JSON() string { return o.body }

// MarshalJSON encodes the order as it was sent (an Order not decoded from a
// body: its orderId, workflow and replyQueue).
func (o Order) MarshalJSON() ([]byte, error) {
	if o.body != "" {
		return []byte(o.body), nil
	}
	return jsonv2.Marshal(struct {
		OrderID    string `json:"orderId"`
		Workflow   string `json:"workflow,omitempty"`
		ReplyQueue string `json:"replyQueue,omitempty"`
	}{o.OrderID, o.Workflow, o.ReplyQueue})
}

// truncate is what a reason quotes of a value it names: at most 80 bytes,
// cut on a character (a cut inside one made the reason invalid UTF-8).
func truncate(s string) string { return Clip(s, 80) }

// KindCancel marks a cancel message on the orders queue.
const KindCancel = "cancel"

// Cancel asks, on the orders queue, for an order's cancellation.
type Cancel struct {
	Kind    string `json:"kind"` // KindCancel
	OrderID string `json:"orderId"`
	Reason  string `json:"reason,omitempty"`
}

// MaxReasonBytes bounds a cancel's reason.
const MaxReasonBytes = 512

// DecodeOrdersMessage parses a body from the orders queue: an Order, a
// Cancel (with "kind":"cancel") or an Event ("kind":"event"); an order has
// no kind.
func DecodeOrdersMessage(body string) (any, error) {
	var head struct {
		Kind *string `json:"kind"`
	}
	if len(body) > MaxEventBytes {
		return DecodeOrder(body) // refused for its size, as an order
	}
	if err := decodeHead(body, &head); err != nil {
		return nil, err
	}
	if head.Kind != nil && *head.Kind == KindEvent {
		var e Event
		if err := decodeStrict(body, MaxEventBytes, &e); err != nil {
			return nil, err
		}
		return e, e.Validate()
	}
	if head.Kind != nil {
		if *head.Kind != KindCancel {
			return nil, Invalid("unknown kind %q on the orders queue (an order has no kind; a cancel is %q, an event %q)",
				truncate(*head.Kind), KindCancel, KindEvent)
		}
		var c Cancel
		if err := decodeStrict(body, MaxEventBytes, &c); err != nil {
			return nil, err
		}
		switch {
		case !idPattern.MatchString(c.OrderID):
			return nil, Invalid("cancel: bad orderId %q", truncate(c.OrderID))
		case len(c.Reason) > MaxReasonBytes:
			return nil, Invalid("cancel of %s: reason is %d bytes, over %d", c.OrderID, len(c.Reason), MaxReasonBytes)
		}
		return c, nil
	}
	return DecodeOrder(body)
}
