package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// agentHold says why agent holds its calls now, if it does: paused, slowed
// by its service's Retry-After, or its rate limit's calls queued.
func (o *Operator) agentHold(ctx context.Context, agent string, now time.Time) (string, error) {
	if !o.Flow.Usable() {
		return "", nil
	}
	c, err := o.Flow.Control(ctx, agent)
	if err != nil {
		return "", err
	}
	switch {
	case c.Paused:
		return fmt.Sprintf("agent %s is paused (by %s)", agent, c.PausedBy), nil
	case c.SlowUntil.After(now):
		return fmt.Sprintf("agent %s's service slowed it until %s", agent, c.SlowUntil.UTC().Format(time.RFC3339)), nil
	}
	next, limit, err := o.Flow.Booked(ctx, agent)
	if err != nil || !next.After(now.Add(time.Second)) {
		return "", err
	}
	return fmt.Sprintf("waiting for its rate turn (agent %s, %s: calls queued %s ahead)", agent, limit,
		next.Sub(now).Round(100*time.Millisecond)), nil
}

// flowWaits marks the ready records of agents that hold their calls now as
// waiting for it: a wait, never an error or an attempt.
func (o *Operator) flowWaits(ctx context.Context, recs []Record, now time.Time) error {
	holds := map[string]string{}
	for i, r := range recs {
		if r.State != workflow.Pending || r.DueAt.IsZero() || r.Kind != "agent" || r.Waiting != nil || r.Agent == "" {
			continue
		}
		why, ok := holds[r.Agent]
		if !ok {
			var err error
			if why, err = o.agentHold(ctx, r.Agent, now); err != nil {
				return err
			}
			holds[r.Agent] = why
		}
		if why != "" {
			recs[i].Waiting = &Waiting{For: "flow", Why: why, Since: r.ReadyAt}
		}
	}
	return nil
}
