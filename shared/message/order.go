package message

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/workflow"
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

// Order is a task sent to the orders queue: a JSON object with its id (the
// member its workflow names: IDFields; orderId by default) and,
// optionally, the workflow that runs it and a queue for its status
// messages. Every other member is the task's data, which its steps read as
// .order, and which its workflow's schema, if the file declares one, checks
// (workflow.Definition.CheckOrder). "kind" is reserved: a message with one
// is a cancel or an event.
type Order struct {
	// OrderID is the order's id, the value of its member IDField.
	OrderID string
	// IDField is the member of the order that is its id: its workflow's
	// (workflow.Definition.IDMember).
	IDField string
	// Workflow names the workflow that runs the order (none: the
	// deployment's default); one the deployment does not run is rejected.
	Workflow string
	// ReplyQueue, if set, is the SQS queue URL where status notifications go;
	// the deployment decides which queues may be named.
	ReplyQueue string
	body       string // the whole order, compacted
}

// IDFields says which member of an order is its id, by the workflow the
// order names ("": the default): workflow.Set is one (Set.IDField). Nil:
// workflow.DefaultIDField for every order (no workflow known).
type IDFields interface {
	IDField(workflowName string) string
}

// idFieldOf is the id field of an order naming workflow.
func idFieldOf(ids IDFields, name string) string {
	if ids == nil {
		return workflow.DefaultIDField
	}
	return ids.IDField(name)
}

// ownMembers are the members of an order the product reads besides its
// id, and those it keeps beside a claim check or sealed data.
var ownMembers = append(slices.Clone(workflow.ProductMembers), kept.CheckMember, kept.SealedMember, kept.KeyMember)

// orderHead is what an order says to the product itself, its id aside.
type orderHead struct {
	Workflow   string `json:"workflow"`
	ReplyQueue string `json:"replyQueue"`
}

// DecodeOrder parses and validates an order body: one JSON object, with
// one meaning (no member twice at any depth, valid UTF-8), a valid id (the
// member ids names for the workflow it names: orderId, applicationId),
// and a workflow and replyQueue that are names and URLs if given.
func DecodeOrder(body string, ids IDFields) (Order, error) {
	if len(body) > MaxOrderBytes {
		return Order{}, Invalid("body is %d bytes, over the %d-byte limit of an order", len(body), MaxOrderBytes)
	}
	var h orderHead
	if err := decodeHead(body, &h); err != nil {
		return Order{}, err
	}
	var members map[string]jsontext.Value
	if err := decodeHead(body, &members); err != nil {
		return Order{}, err
	}
	o := Order{IDField: idFieldOf(ids, h.Workflow), Workflow: h.Workflow, ReplyQueue: h.ReplyQueue}
	if err := o.readID(members); err != nil {
		return Order{}, err
	}
	if err := o.ownOnly(members); err != nil {
		return Order{}, err
	}
	v := jsontext.Value(body)
	if err := v.Compact(); err != nil {
		return Order{}, Invalid("bad JSON: %s", describe(err))
	}
	o.body = string(v)
	return o, o.Validate()
}

// readID reads the order's id, its member o.IDField, from its members.
func (o *Order) readID(members map[string]jsontext.Value) error {
	raw, ok := members[o.IDField]
	if !ok || raw.Kind() == 'n' {
		return o.noID(members)
	}
	if raw.Kind() != '"' {
		return Invalid("field %q must be string (the order's id), not %s", o.IDField, kindName(raw.Kind()))
	}
	return jsonv2.Unmarshal(raw, &o.OrderID)
}

// noID says why an order without its id is refused, naming the member.
func (o *Order) noID(members map[string]jsontext.Value) error {
	whose := ""
	switch {
	case o.IDField == workflow.DefaultIDField:
	case o.Workflow == "":
		whose = " (the default workflow's id field)"
	default:
		whose = fmt.Sprintf(" (workflow %s's id field)", o.Workflow)
	}
	why := fmt.Sprintf("an order needs its id, %s%s", o.IDField, whose)
	if _, hasDefault := members[workflow.DefaultIDField]; hasDefault && o.IDField != workflow.DefaultIDField {
		why += fmt.Sprintf("; its %s is not its id", workflow.DefaultIDField)
	}
	return &InvalidError{Reason: why, noID: true}
}

// ownOnly refuses the members an order may not have: a kind, the
// product's own members kept beside a claim check or sealed data, and one
// of the members the product reads (its id's among them) in another case.
func (o *Order) ownOnly(members map[string]jsontext.Value) error {
	if _, ok := members["kind"]; ok {
		return Invalid("unknown field \"kind\": an order has no kind (a cancel is %q, an event %q)", KindCancel, KindEvent)
	}
	for _, own := range []string{kept.CheckMember, kept.SealedMember, kept.KeyMember} {
		if _, ok := members[own]; ok {
			return Invalid("member %q is the product's own (a claim check, or sealed data, and its key): an order has none", own)
		}
	}
	read := append([]string{o.IDField, workflow.DefaultIDField}, ownMembers...)
	for name := range members {
		for _, f := range read {
			if name != f && strings.EqualFold(name, f) {
				return Invalid("member %q: %s in another case (a reader that ignores case would take it for that)", truncate(name), f)
			}
		}
	}
	return nil
}

// MaxReplyQueueBytes bounds an order's replyQueue.
const MaxReplyQueueBytes = 512

// Validate checks the members of the order the product reads.
func (o Order) Validate() error {
	field := cmp.Or(o.IDField, workflow.DefaultIDField)
	if !idPattern.MatchString(o.OrderID) {
		return Invalid("%s %q must be 1-64 letters, digits or _.:- starting with a letter or digit", field, truncate(o.OrderID))
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
// body: its id, as its IDField, workflow and replyQueue).
func (o Order) MarshalJSON() ([]byte, error) {
	if o.body != "" {
		return []byte(o.body), nil
	}
	m := map[string]string{cmp.Or(o.IDField, workflow.DefaultIDField): o.OrderID}
	if o.Workflow != "" {
		m["workflow"] = o.Workflow
	}
	if o.ReplyQueue != "" {
		m["replyQueue"] = o.ReplyQueue
	}
	return jsonv2.Marshal(m, jsonv2.Deterministic(true))
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

// DecodeOrdersMessage parses a body from the orders queue: an Order (its
// id the member ids names for its workflow), a Cancel (with
// "kind":"cancel") or an Event ("kind":"event"); an order has no kind. A
// cancel and an event name their order by the product's own member,
// orderId, whatever the order's id field.
func DecodeOrdersMessage(body string, ids IDFields) (any, error) {
	var head struct {
		Kind *string `json:"kind"`
	}
	if len(body) > MaxEventBytes {
		return DecodeOrder(body, ids) // refused for its size, as an order
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
	return DecodeOrder(body, ids)
}

// IDOf is the id of the order a body from the orders or events queue is
// about, read leniently, as a dead-letter queue shows it (a body refused
// may be refused for anything: a member it lacks, its size): an order's by
// the id field of the workflow it names (ids), a cancel's or an event's by
// the product's own orderId. "" if it names none, or is not a JSON object.
func IDOf(body []byte, ids IDFields) string {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return ""
	}
	str := func(name string) string {
		var s string
		_ = json.Unmarshal(members[name], &s)
		return s
	}
	field := workflow.DefaultIDField
	if _, isMessage := members["kind"]; !isMessage {
		field = idFieldOf(ids, str("workflow"))
	}
	return str(field)
}
