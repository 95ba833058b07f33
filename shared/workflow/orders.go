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
		StepTimeout:   30 * time.Second,
		MaxFailures:   3,
		RetryBackoff:  5 * time.Second,
		PickupTimeout: time.Minute,
	}
}

// InventoryAgent is the remote service the default order workflow calls.
const InventoryAgent = "inventory"

// Orders is the default order workflow: one step that reserves the order's
// items with the inventory service.
func Orders(s Settings) Definition {
	return Definition{
		Name:          "order",
		PickupTimeout: s.PickupTimeout,
		Steps: []Step{{
			Name:         "reserve-inventory",
			Agent:        InventoryAgent,
			Timeout:      s.StepTimeout,
			MaxFailures:  s.MaxFailures,
			RetryBackoff: s.RetryBackoff,
		}},
	}
}

// Validate checks the settings make a usable workflow.
func (s Settings) Validate() error {
	return Orders(s).Validate([]string{InventoryAgent})
}
