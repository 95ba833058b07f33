// Command temporal is the peers benchmark's Temporal engine: Temporal's
// server in this process (the temporaltest package: its frontend on
// loopback, SQLite in memory), a worker with Temporal's default options,
// and the order as a workflow of three activities. The peers program
// builds and runs it as a child; it is a module of its own because
// Temporal's server and the product cannot share one build (they want
// different versions of OpenTelemetry's log API).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	"github.com/sas-go/sas/docs/peers/harness"
)

// taskQueue is the task queue of the benchmark's workflow.
const taskQueue = "orders"

func main() {
	var c harness.Config
	c.Bind(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	svc := harness.NewService(c.ServiceURL)
	err := harness.RunChild(ctx, c, "Go process (server, worker)", func(context.Context) (harness.Engine, error) {
		return start(svc)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
}

// engine is the running server, its client and worker.
type engine struct {
	server *temporaltest.TestServer
	client client.Client
	runs   harness.Handles[client.WorkflowRun]
}

// activities are the order's activities: each calls its service.
type activities struct{ svc *harness.Service }

// Call is one step: a POST of the order to its service.
func (a *activities) Call(ctx context.Context, orderID, action, service, body string) error {
	return a.svc.Call(ctx, orderID, action, service, body)
}

// order is the order's workflow: its steps one after another, 20 s each
// (the product's step timeout), three attempts at most.
func order(ctx workflow.Context, orderID, body string) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
	var a *activities
	for _, s := range harness.Steps {
		if err := workflow.ExecuteActivity(ctx, a.Call, orderID, s.Action, s.Service, body).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// start starts the server, a client and a worker.
func start(svc *harness.Service) (_ *engine, err error) {
	e := &engine{}
	defer func() {
		if r := recover(); r != nil { // temporaltest panics when it cannot start
			err = fmt.Errorf("start the Temporal server: %v", r)
		}
	}()
	quiet := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	e.server = temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
	harness.Logf("Temporal server in process, frontend on %s, SQLite in memory", e.server.GetFrontendHostPort())
	e.client = e.server.GetDefaultClient()
	e.server.NewWorker(taskQueue, func(r worker.Registry) {
		r.RegisterWorkflow(order)
		r.RegisterActivity(&activities{svc: svc})
	})
	return e, nil
}

// Start starts each order's workflow.
func (e *engine) Start(ctx context.Context, ids []string) error {
	return e.runs.Start(ids, func(id, body string) (client.WorkflowRun, error) {
		return e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, order, id, body)
	})
}

// Wait waits for each workflow's result.
func (e *engine) Wait(ctx context.Context, ids []string) (map[string]time.Time, error) {
	return e.runs.Wait(ids, func(run client.WorkflowRun) error { return run.Get(ctx, nil) })
}

// Close stops the worker, the client and the server.
func (e *engine) Close() (err error) {
	defer func() {
		if r := recover(); r != nil { // Stop reports a shutdown error through a testing.T it has not
			err = fmt.Errorf("stop the Temporal server: %v", r)
		}
	}()
	e.server.Stop()
	return nil
}
