package workflow

import (
	"encoding/json"
	"fmt"
	"time"
)

// TimersFit checks that no timer of d ends after the order's deadline for
// an order submitted at: a timer whose until, over the order alone, gives
// a later time would fail the order expired when it comes, its work undone,
// so the order is refused now, with the reason. A timer whose until reads
// what steps answered (or gives no time yet) is judged when it starts. The
// check only gets easier as at grows, so a resend of an order taken is
// taken again.
func (d Definition) TimersFit(order json.RawMessage, at time.Time) error {
	if d.Deadline <= 0 {
		return nil
	}
	deadline := at.Add(d.Deadline)
	for _, st := range d.Steps {
		if st.Sleep == nil || st.Sleep.Until == "" {
			continue
		}
		wake, err := st.Sleep.When(at, Document{Order: order, Results: map[string]json.RawMessage{}})
		if err != nil || !wake.After(deadline) {
			continue
		}
		return fmt.Errorf("step %s sleeps until %s (its until: %s), after the order's deadline (%s from now, %s): "+
			"it would fail expired and be undone; send the order later, or raise workflow %s's deadline",
			st.Name, wake.UTC().Format(time.RFC3339), st.Sleep.Until, d.Deadline, deadline.UTC().Format(time.RFC3339), d.Name)
	}
	return nil
}
