// Package shop is the example that runs through this product: an e-commerce
// order, the data the example workflows' orders carry (their schema,
// shared/workflow/examples, checks it at Submission) and what the example
// services read from it.
package shop

import "encoding/json"

// Order is a shop order as sent to the orders queue.
type Order struct {
	OrderID    string `json:"orderId"`
	CustomerID string `json:"customerId"`
	Items      []Item `json:"items"`
	// ReplyQueue, if set, is the SQS queue URL where status notifications go.
	ReplyQueue string `json:"replyQueue,omitempty"`
	// Workflow names the workflow that runs the order (none: the
	// deployment's default).
	Workflow string `json:"workflow,omitempty"`
}

// Item is one line of an order.
type Item struct {
	SKU            string `json:"sku"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unitPriceCents"`
}

// JSON is the order's encoding, as sent to the orders queue.
func (o Order) JSON() string {
	b, _ := json.Marshal(o) // an Order always marshals
	return string(b)
}
