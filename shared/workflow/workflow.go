// Package workflow holds the pure rules of the pattern: step definitions, the
// states a task and its steps move through, and the supervisor's recovery
// decision. It imports no AWS SDK.
package workflow

import (
	"errors"
	"fmt"
	"time"
)

// State is the ProcessState of a task or step record.
type State string

// The states of task and step records.
const (
	Pending    State = "Pending"
	Processing State = "Processing"
	Processed  State = "Processed"
	Error      State = "Error"
)

// Ended reports whether a task in state s needs no more work.
func (s State) Ended() bool { return s == Processed || s == Error }

// Step describes one action of a workflow: the Agent (remote service) it calls
// and how long and how often it may try.
type Step struct {
	Name         string        // unique within the workflow; part of the idempotency key
	Agent        string        // the remote service whose Agent runs this step
	Timeout      time.Duration // CompleteBy = claim time + Timeout
	MaxFailures  int           // supervisor recoveries allowed before the step is an Error
	RetryBackoff time.Duration // base delay before a recovered step is scheduled again
}

// Definition is an ordered list of steps run one after another.
type Definition struct {
	Name          string
	Steps         []Step
	PickupTimeout time.Duration // how long a ready Pending step may wait for a claim
}

// Validate checks the definition against the agents the deployment runs.
func (d Definition) Validate(agents []string) error {
	if d.Name == "" {
		return errors.New("workflow: definition has no name")
	}
	if len(d.Steps) == 0 {
		return fmt.Errorf("workflow %q: no steps", d.Name)
	}
	if d.PickupTimeout <= 0 {
		return fmt.Errorf("workflow %q: pickup timeout must be positive", d.Name)
	}
	known := make(map[string]bool, len(agents))
	for _, a := range agents {
		known[a] = true
	}
	seen := make(map[string]bool, len(d.Steps))
	for i, s := range d.Steps {
		switch {
		case s.Name == "":
			return fmt.Errorf("workflow %q: step %d has no name", d.Name, i)
		case seen[s.Name]:
			return fmt.Errorf("workflow %q: duplicate step %q", d.Name, s.Name)
		case !known[s.Agent]:
			return fmt.Errorf("workflow %q: step %q calls unknown agent %q", d.Name, s.Name, s.Agent)
		case s.Timeout <= 0:
			return fmt.Errorf("workflow %q: step %q has no timeout", d.Name, s.Name)
		case s.MaxFailures < 1:
			return fmt.Errorf("workflow %q: step %q needs a failure threshold of at least 1", d.Name, s.Name)
		case s.RetryBackoff < 0:
			return fmt.Errorf("workflow %q: step %q has a negative retry backoff", d.Name, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// Agents lists the distinct agents the definition calls, in step order.
func (d Definition) Agents() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range d.Steps {
		if !seen[s.Agent] {
			seen[s.Agent] = true
			out = append(out, s.Agent)
		}
	}
	return out
}

// IdempotencyKey is the key an Agent sends with every attempt of one step of
// one order, so the remote service applies the step's effect once.
func IdempotencyKey(orderID, step string) string { return orderID + "/" + step }
