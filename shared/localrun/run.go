package localrun

import (
	"context"
	"fmt"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/runner"
)

// Runner builds a runner with fresh handler instances (new instance ids), as
// a restarted process would have.
func (s *Stack) Runner() (*runner.Runner, error) {
	d, t, o := s.Deployment, s.Topology(), s.Opts
	src := func(fn, queue string, h runner.Handler) runner.Source {
		return runner.Source{Function: fn, QueueURL: s.QueueURL(queue), QueueARN: s.Resources.QueueARNs[queue],
			Handler: h, Pollers: o.Pollers, Timeout: t.FunctionTimeout, BatchSize: o.BatchSize, Window: o.BatchWindow}
	}
	r := &runner.Runner{SQS: d.Clients.SQS, Faults: o.Faults, Log: o.Log, Stats: s.Stats, DelayFor: o.DelayFor}
	sub := d.Submission()
	sub.Crash = o.Crash
	r.Sources = append(r.Sources, src("submission", t.OrdersQueue().Name, sub.Handle))
	for range o.Schedulers {
		h, err := d.Scheduler(deployment.InstanceID("scheduler"))
		if err != nil {
			return nil, err
		}
		h.Crash = o.Crash
		r.Sources = append(r.Sources, src("scheduler", t.SchedulerQueue().Name, h.Handle))
		for _, a := range t.Agents {
			r.Sources = append(r.Sources, src("scheduler", t.AgentResponses(a).Name, h.Handle))
		}
	}
	for _, a := range t.Agents {
		// An agent's batch waits for its slowest remote call (up to the step
		// timeout); Lambda would run more copies meanwhile, so poll wider.
		ah := d.Agent(a)
		ah.Crash = o.Crash
		as := src("agent-"+a, t.AgentRequests(a).Name, ah.Handle)
		as.Pollers *= 4
		r.Sources = append(r.Sources, as)
	}
	for range o.Supervisors {
		sup := d.Supervisor(deployment.InstanceID("supervisor"))
		sup.Crash = o.Crash
		r.Tickers = append(r.Tickers, runner.Ticker{Function: "supervisor", Every: o.SupervisorEvery,
			Run: func(ctx context.Context) error { _, err := sup.Sweep(ctx); return err }})
	}
	return r, nil
}

// Run runs the pipeline until ctx ends.
func (s *Stack) Run(ctx context.Context) error {
	r, err := s.Runner()
	if err != nil {
		return fmt.Errorf("local runner: %w", err)
	}
	return r.Run(ctx)
}
