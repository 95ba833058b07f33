// Package points is the worked example of an Agent written in Go: loyalty
// points for an order, one point per whole unit of currency spent. It
// implements agent.Remote, the one interface a Go agent needs.
package points

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/shop"
)

// The actions of the fulfilment workflow's loyalty agent.
const (
	Award  = "award-points"
	Revoke = "revoke-points"
)

// Service awards and revokes an order's points. It is a pure function of
// the order, so every attempt with one idempotency key answers alike; a
// service that keeps state would record its effect under the key.
type Service struct{}

// Result is what Apply answers.
type Result struct {
	CustomerID string `json:"customerId"`
	Points     int64  `json:"points"` // negative when revoked
	Key        string `json:"key"`
}

// Apply implements agent.Remote. An order it cannot read, or an action it
// does not know, is refused for good (*agent.PermanentError): no retry
// would change the answer.
func (Service) Apply(_ context.Context, action, key string, payload []byte) ([]byte, error) {
	var doc struct { // the step's document: the order and the results before it
		Order shop.Order `json:"order"`
	}
	if err := json.Unmarshal(payload, &doc); err != nil {
		return nil, &agent.PermanentError{Status: 400, Body: fmt.Sprintf("loyalty: the step's document is not JSON: %v", err)}
	}
	o := doc.Order
	n := earned(o)
	switch action {
	case Award:
	case Revoke:
		n = -n
	default:
		return nil, &agent.PermanentError{Status: 404, Body: fmt.Sprintf("loyalty: no action %q (want %s or %s)", action, Award, Revoke)}
	}
	return json.Marshal(Result{CustomerID: o.CustomerID, Points: n, Key: key})
}

// earned is one point per whole unit of currency the order costs.
func earned(o shop.Order) int64 {
	var cents int64
	for _, it := range o.Items {
		cents += int64(it.Quantity) * it.UnitPriceCents
	}
	return cents / 100
}
