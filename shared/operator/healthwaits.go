package operator

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The reasons an order in flight waits, as WaitReason names them; the
// others name what they wait for: "event: <its name>", "held: <the held
// record's cause>", "flow: <a class of statestore.FlowClass>".
const (
	WaitAtWork   = "at work"  // a record ready for its claim, or its call running
	WaitUndoing  = "undoing"  // its completed steps are undone
	WaitTimer    = "timer"    // a timer armed
	WaitCallback = "callback" // an async call's service is to answer
)

// waitOrder is the order in which an order in flight none of whose
// records is at work is counted by what one of them waits for: its flow
// control first, then a callback, an event, a timer.
var waitOrder = []statestore.WaitsFor{statestore.ForFlow, statestore.ForCallback, statestore.ForEvent, statestore.ForTimer}

// WaitReason is what an order in flight waits on, from its records (Task.At):
// "held: <cause>" for its operator, "undoing" its completed steps, "at work"
// if one of its records is (ready for its claim or its call running), else
// what one waits for, by waitOrder: "flow: <class>" (pause, line, rate,
// 503), "callback", "event: <name>", "timer". holds says why an agent holds
// its calls now ("" if it does not: see Operator.agentHold): a record ready
// for an agent that holds them waits in its flow control, not at work.
func WaitReason(t statestore.Task, holds func(agent string) string) string {
	switch t.State {
	case workflow.Held:
		for _, s := range t.At {
			if s.State == workflow.Error && !s.Undo {
				return "held: " + cmp.Or(string(s.Cause), "failed")
			}
		}
		return "held"
	case workflow.Compensating:
		return WaitUndoing
	}
	var waits []statestore.Spot
	for _, s := range t.At {
		switch {
		case s.State == workflow.Error:
		case s.Waits == statestore.ForWork && s.State == workflow.Pending && s.Agent != "" && holds(s.Agent) != "":
			s.Waits, s.Why = statestore.ForFlow, holds(s.Agent)
			waits = append(waits, s)
		case s.Waits == statestore.ForWork:
			return WaitAtWork
		default:
			waits = append(waits, s)
		}
	}
	if len(waits) == 0 {
		return WaitAtWork
	}
	s := slices.MinFunc(waits, func(a, b statestore.Spot) int {
		return cmp.Compare(slices.Index(waitOrder, a.Waits), slices.Index(waitOrder, b.Waits))
	})
	switch s.Waits {
	case statestore.ForFlow:
		return "flow: " + statestore.FlowClass(s.Why)
	case statestore.ForEvent:
		return "event: " + s.Event
	case statestore.ForTimer:
		return WaitTimer
	}
	return WaitCallback
}

// agentHolds is Operator.agentHold, read once an agent for one view; the
// first error is kept in *err (and nothing held is said after it).
func (o *Operator) agentHolds(ctx context.Context, now time.Time, err *error) func(agent string) string {
	holds := map[string]string{}
	return func(agent string) string {
		why, ok := holds[agent]
		if !ok && *err == nil {
			why, *err = o.agentHold(ctx, agent, now)
			holds[agent] = why
		}
		return why
	}
}
