package workflow

import "time"

// Settings are the deployment's knobs for the default order workflow.
type Settings struct {
	StepTimeout   time.Duration // CompleteBy = claim + StepTimeout
	MaxFailures   int           // supervisor recoveries before a step is an Error
	RetryBackoff  time.Duration // base of the supervisor's growing backoff
	PickupTimeout time.Duration // a ready step not claimed by then is recovered
}

// DefaultSettings are the values used when the deployment sets none.
func DefaultSettings() Settings {
	return Settings{
		StepTimeout:   20 * time.Second,
		MaxFailures:   3,
		RetryBackoff:  5 * time.Second,
		PickupTimeout: time.Minute,
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
		Steps: []Step{
			{Action: act("reserve-inventory", InventoryAgent), Undo: &release},
			{Action: act("charge-payment", PaymentAgent), Undo: &refund},
			{Action: act("create-shipment", ShippingAgent)},
		},
	}
}

// Validate checks the settings make a usable workflow.
func (s Settings) Validate() error {
	return Orders(s).Validate(OrderAgents)
}
