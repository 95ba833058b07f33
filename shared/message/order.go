package message

import (
	"encoding/json"
	"regexp"
	"strings"
)

// MaxOrderBytes is the largest order body accepted.
const MaxOrderBytes = 32 * 1024

// Limits on an order's contents.
const (
	MaxItems    = 100
	MaxQuantity = 10_000
	MaxCents    = 100_000_000_00 // one hundred million in the currency's major unit
)

var (
	idPattern       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)
	workflowPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
)

// Order is an e-commerce order as sent to the orders queue.
type Order struct {
	OrderID    string `json:"orderId"`
	CustomerID string `json:"customerId"`
	Items      []Item `json:"items"`
	// ReplyQueue, if set, is the SQS queue URL where status notifications go;
	// the deployment decides which queues may be named.
	ReplyQueue string `json:"replyQueue,omitempty"`
	// Workflow names the workflow that runs the order (none: the
	// deployment's default); one the deployment does not run is rejected.
	Workflow string `json:"workflow,omitempty"`
}

// Item is one line of an order.
type Item struct {
	SKU            string `json:"sku"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unitPriceCents"`
}

// DecodeOrder parses and validates an order body.
func DecodeOrder(body string) (Order, error) {
	var o Order
	if err := decodeStrict(body, MaxOrderBytes, &o); err != nil {
		return Order{}, err
	}
	return o, o.Validate()
}

// Validate checks every field of the order.
func (o Order) Validate() error {
	if !idPattern.MatchString(o.OrderID) {
		return Invalid("orderId %q must be 1-64 letters, digits or _.:- starting with a letter or digit", truncate(o.OrderID))
	}
	if !idPattern.MatchString(o.CustomerID) {
		return Invalid("order %s: customerId %q must be 1-64 letters, digits or _.:-", o.OrderID, truncate(o.CustomerID))
	}
	if len(o.Items) == 0 || len(o.Items) > MaxItems {
		return Invalid("order %s: needs 1 to %d items, has %d", o.OrderID, MaxItems, len(o.Items))
	}
	if o.Workflow != "" && !workflowPattern.MatchString(o.Workflow) {
		return Invalid("order %s: workflow %q is not a workflow's name", o.OrderID, truncate(o.Workflow))
	}
	if len(o.ReplyQueue) > 512 || strings.ContainsAny(o.ReplyQueue, " \t\n") {
		return Invalid("order %s: replyQueue is not a queue URL", o.OrderID)
	}
	for i, it := range o.Items {
		switch {
		case !idPattern.MatchString(it.SKU):
			return Invalid("order %s: item %d: sku %q is not a valid SKU", o.OrderID, i, truncate(it.SKU))
		case it.Quantity < 1 || it.Quantity > MaxQuantity:
			return Invalid("order %s: item %d: quantity %d is outside 1..%d", o.OrderID, i, it.Quantity, MaxQuantity)
		case it.UnitPriceCents < 0 || it.UnitPriceCents > MaxCents:
			return Invalid("order %s: item %d: unitPriceCents %d is outside 0..%d", o.OrderID, i, it.UnitPriceCents, int64(MaxCents))
		}
	}
	return nil
}

// JSON is the order's canonical encoding, as stored and as sent to Agents.
func (o Order) JSON() string {
	b, _ := json.Marshal(o) // an Order always marshals
	return string(b)
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

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
	if len(body) <= MaxOrderBytes && head.Kind != nil {
		if *head.Kind != KindCancel {
			return nil, Invalid("unknown kind %q on the orders queue (an order has no kind; a cancel is %q, an event %q)",
				truncate(*head.Kind), KindCancel, KindEvent)
		}
		var c Cancel
		if err := decodeStrict(body, MaxOrderBytes, &c); err != nil {
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
