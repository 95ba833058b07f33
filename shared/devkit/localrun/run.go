package localrun

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/runner"
)

// Runner builds a runner with fresh handler instances (new instance ids), as
// a restarted process would have.
func (s *Stack) Runner(ctx context.Context) (*runner.Runner, error) {
	d, t, o := s.Deployment, s.Topology(), s.Opts
	capacity := map[string]*runner.Capacity{}
	for fn, per := range o.Throttle {
		capacity[fn] = runner.NewCapacity(per)
	}
	r := &runner.Runner{SQS: d.Clients.SQS, Faults: o.Faults, Log: o.Log, Stats: s.Stats, DelayFor: o.DelayFor}
	add := func(fn, queue string, h runner.Handler, pollers int) {
		if slices.Contains(o.Stopped, fn) {
			return
		}
		r.Sources = append(r.Sources, runner.Source{Function: fn, QueueURL: s.QueueURL(queue),
			QueueARN: s.Resources.QueueARNs[queue], Handler: h, Pollers: pollers, Timeout: t.FunctionTimeout,
			BatchSize: o.BatchSize, Window: o.BatchWindow, Capacity: capacity[fn]})
	}
	sub, err := d.Submission()
	if err != nil {
		return nil, err
	}
	sub.Crash = o.Crash
	add("submission", t.OrdersQueue().Name, sub.Handle, o.Pollers)
	// Events and callbacks are quick, and an async step's timeout counts
	// their wait: as many pollers as an agent's queue (a Lambda event source
	// mapping scales to its MaximumConcurrency alone).
	add("submission", t.EventsQueue().Name, sub.Handle, o.AgentPollers)
	for range o.Schedulers {
		h, err := d.Scheduler()
		if err != nil {
			return nil, err
		}
		h.Crash = o.Crash
		add("scheduler", t.SchedulerQueue().Name, h.Handle, o.Pollers)
		for _, a := range t.Agents {
			add("scheduler", t.AgentResponses(a).Name, h.Handle, o.Pollers)
		}
	}
	for _, a := range t.Agents {
		ah, err := d.Agent(ctx, a, deployment.InstanceID())
		if err != nil {
			return nil, err
		}
		ah.Crash = o.Crash
		add("agent-"+a, t.AgentRequests(a).Name, ah.Handle, o.AgentPollers)
	}
	for range o.Supervisors {
		if slices.Contains(o.Stopped, "supervisor") {
			break
		}
		sup := d.Supervisor(deployment.InstanceID())
		sup.Crash = o.Crash
		r.Tickers = append(r.Tickers, runner.Ticker{Function: "supervisor", Every: o.SupervisorEvery,
			Run: func(ctx context.Context) error { _, err := sup.Sweep(ctx); return err }})
	}
	return r, nil
}

// Run runs the pipeline until ctx ends.
func (s *Stack) Run(ctx context.Context) error {
	r, err := s.Runner(ctx)
	if err != nil {
		return fmt.Errorf("local runner: %w", err)
	}
	return r.Run(ctx)
}

// Start runs the pipeline in the background (Run) until stop is called or
// ctx ends; stop returns once the runner has, and may be called again.
func (s *Stack) Start(ctx context.Context) (stop func()) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(runCtx) }()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}
