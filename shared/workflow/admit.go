package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Lookup is the workflow an order names ("": the set's first), or an error
// that says the set does not run it and which it runs.
func (s Set) Lookup(name string) (Definition, error) {
	if d, ok := s.Get(name); ok {
		return d, nil
	}
	return Definition{}, fmt.Errorf("workflow %q is not one this deployment runs (%s)", name, strings.Join(s.Names(), ", "))
}

// Admit checks an order (its JSON) submitted at as Submission does before
// it stores it: against the workflow's schema, then for the items its
// forEach steps run over, whose counts it returns (by step index), then its
// timers against its deadline (TimersFit). The error names the order's
// field at fault, or says why the order cannot run the workflow. Submission
// runs it on each order it takes; sasctl submit, on each it sends, so that
// what Submission would refuse is not sent; the test kit (sastest), on each
// a test submits.
func (d Definition) Admit(order json.RawMessage, at time.Time) (map[int]int, error) {
	if err := d.CheckOrder(order); err != nil {
		return nil, err
	}
	items, err := d.Items(order)
	if err != nil {
		return nil, &Refusal{Err: fmt.Errorf("cannot run workflow %s: %w", d.Name, err),
			Unquoted: fmt.Sprintf("cannot run workflow %s: a forEach expression failed on the order", d.Name)}
	}
	if err := d.TimersFit(order, at); err != nil {
		return nil, &Refusal{Err: err, Unquoted: fmt.Sprintf("cannot run workflow %s: a timer's until is after the order's deadline", d.Name)}
	}
	return items, nil
}

// Refusal is why Admit refuses an order, and the same quoting none of its
// data (no value a schema or an expression met): what a deployment that
// seals the orders' data logs and sends to its DLQ.
type Refusal struct {
	Err      error
	Unquoted string
}

func (r *Refusal) Error() string { return r.Err.Error() }

func (r *Refusal) Unwrap() error { return r.Err }

// Unquoted is err's reason quoting none of the order's data: a Refusal's
// Unquoted, or err's own text (one that is no Refusal quotes none).
func Unquoted(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Unquoted
	}
	return err.Error()
}
