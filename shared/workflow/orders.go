package workflow

import (
	"fmt"
	"time"
)

// Settings are the deployment's knobs for the default order workflow.
type Settings struct {
	Workflow      string        // which workflow: "order" (the default, three steps) or "single"
	StepTimeout   time.Duration // CompleteBy = claim + StepTimeout
	MaxFailures   int           // supervisor recoveries before a step is an Error
	RetryBackoff  time.Duration // base of the supervisor's growing backoff
	PickupTimeout time.Duration // a ready step not claimed by then is looked at: its message may be lost
	OrderDeadline time.Duration // an order not ended by then fails for good (0: DefaultOrderDeadline)
}

// DefaultOrderDeadline bounds an order's run when the settings do not.
const DefaultOrderDeadline = 24 * time.Hour

// deadline is the order deadline the settings give.
func (s Settings) deadline() time.Duration {
	if s.OrderDeadline == 0 {
		return DefaultOrderDeadline
	}
	return s.OrderDeadline
}

// DefaultSettings are the values used when the deployment sets none.
func DefaultSettings() Settings {
	return Settings{
		StepTimeout:   20 * time.Second,
		MaxFailures:   3,
		RetryBackoff:  5 * time.Second,
		PickupTimeout: time.Minute,
		OrderDeadline: DefaultOrderDeadline,
	}
}

// The remote services the default order workflow calls, each wrapped by its
// own Agent.
const (
	InventoryAgent = "inventory"
	PaymentAgent   = "payment"
	ShippingAgent  = "shipping"
)

// OrderAgents are the agents of the default order workflow.
var OrderAgents = []string{InventoryAgent, PaymentAgent, ShippingAgent}

// Orders is the default order workflow: reserve inventory → charge payment →
// create shipment; a failure undoes what was done (release the inventory,
// refund the payment), in reverse order.
func Orders(s Settings) Definition {
	act := func(name, agent string) Action {
		return Action{Name: name, Agent: agent, Timeout: s.StepTimeout, MaxFailures: s.MaxFailures, RetryBackoff: s.RetryBackoff}
	}
	release, refund := act("release-inventory", InventoryAgent), act("refund-payment", PaymentAgent)
	return Definition{
		Name:          "order",
		PickupTimeout: s.PickupTimeout,
		Deadline:      s.deadline(),
		Steps: []Step{
			{Action: act("reserve-inventory", InventoryAgent), Undo: &release},
			{Action: act("charge-payment", PaymentAgent), Undo: &refund},
			{Action: act("create-shipment", ShippingAgent)},
		},
	}
}

// The workflows a deployment can run, by Settings.Workflow.
const (
	OrderWorkflow  = "order"  // Orders: reserve inventory → charge payment → create shipment
	SingleWorkflow = "single" // Single: charge payment, one step
)

// Single is a one-step workflow (charge the payment, nothing to undo): the
// smallest unit of work the pipeline coordinates, whose cost per order is the
// product's floor.
func Single(s Settings) Definition {
	return Definition{
		Name:          SingleWorkflow,
		PickupTimeout: s.PickupTimeout,
		Deadline:      s.deadline(),
		Steps: []Step{{Action: Action{Name: "charge-payment", Agent: PaymentAgent, Timeout: s.StepTimeout,
			MaxFailures: s.MaxFailures, RetryBackoff: s.RetryBackoff}}},
	}
}

// For returns the workflow the settings name (the order workflow if none).
func For(s Settings) (Definition, error) {
	switch s.Workflow {
	case "", OrderWorkflow:
		return Orders(s), nil
	case SingleWorkflow:
		return Single(s), nil
	}
	return Definition{}, fmt.Errorf("unknown workflow %q (want %q or %q)", s.Workflow, OrderWorkflow, SingleWorkflow)
}

// Validate checks the settings make a usable workflow.
func (s Settings) Validate() error {
	d, err := For(s)
	if err != nil {
		return err
	}
	return d.Validate(d.Agents())
}
