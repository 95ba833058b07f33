package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/peers/harness"
	"github.com/sas-go/sas/shared/devkit/sqsmem"
	"github.com/sas-go/sas/shared/workflow"
)

// sasEngine is this product's local pipeline as sasctl demo runs it: the
// queues in process (sqsmem), DynamoDB Local as the state store, the local
// runner calling the very handlers the Lambda mains run, the Supervisor's
// sweep every second, and the example order workflow against the remote
// simulator. moto serves the payload bucket (S3), as in sasctl demo: this
// workflow's orders stay inline, but the stack is provisioned as a
// deployment is, with its bucket.
type sasEngine struct {
	moto   *emulator.Process
	ddb    *emulator.Process
	queues *sqsmem.Listening
	stack  *localrun.Stack
	stop   func()
	sent   map[string]int // the index of each order sent, for its body
}

// startSAS starts the product's local pipeline, its agents calling the
// service at serviceURL, DynamoDB Local installed into cacheDir on first
// use, logs in runDir.
func startSAS(ctx context.Context, serviceURL, cacheDir, runDir string) (_ *sasEngine, err error) {
	e := &sasEngine{sent: map[string]int{}}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	if e.moto, err = emulator.StartMoto(ctx, runDir); err != nil {
		return nil, fmt.Errorf("moto (the payload bucket's S3): %w", err)
	}
	harness.Logf("moto on %s (pid %d)", e.moto.Endpoint, e.moto.PID())
	if e.ddb, err = emulator.StartDynamoDBLocal(ctx, cacheDir, runDir); err != nil {
		return nil, fmt.Errorf("DynamoDB Local: %w", err)
	}
	harness.Logf("DynamoDB Local on %s (pid %d)", e.ddb.Endpoint, e.ddb.PID())
	if e.queues, err = sqsmem.Listen("127.0.0.1:0", sqsmem.Options{}); err != nil {
		return nil, fmt.Errorf("in-process queues: %w", err)
	}
	logs, err := os.Create(filepath.Join(runDir, "handlers.log"))
	if err != nil {
		return nil, fmt.Errorf("handler log: %w", err)
	}
	o := localrun.Options{
		Prefix: "peers", Endpoint: e.moto.Endpoint, DynamoDBEndpoint: e.ddb.Endpoint,
		QueuesEndpoint: e.queues.Endpoint, RemoteURL: serviceURL,
		Workflows:       workflow.MustSet(workflow.MustExample(workflow.OrderWorkflow)),
		SupervisorEvery: time.Second, Log: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: io.Discard,
	}
	if e.stack, err = localrun.New(ctx, o); err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}
	e.stop = e.stack.Start(ctx)
	return e, nil
}

// Start sends the orders to the orders queue, ten per request.
func (e *sasEngine) Start(ctx context.Context, ids []string) error {
	bodies := make([]string, len(ids))
	for i, id := range ids {
		e.sent[id] = len(e.sent)
		bodies[i] = harness.OrderBody(id, e.sent[id])
	}
	return e.stack.SendOrders(ctx, bodies...)
}

// Wait reads the orders' tasks until each ended: an order's end is its
// task's CompletedAt (to the millisecond), set by the write that ended it,
// so the reads' pace does not count in its time.
func (e *sasEngine) Wait(ctx context.Context, ids []string) (map[string]time.Time, error) {
	every := 250 * time.Millisecond
	if len(ids) == 1 {
		every = 5 * time.Millisecond
	}
	ends := map[string]time.Time{}
	pending := ids
	for len(pending) > 0 {
		tasks, err := e.stack.Store.Tasks(ctx, pending)
		if err != nil {
			return nil, fmt.Errorf("read the tasks: %w", err)
		}
		var still []string
		for _, id := range pending {
			t, ok := tasks[id]
			switch {
			case !ok || t.CompletedAt.IsZero():
				still = append(still, id)
			case t.State != workflow.Processed:
				return nil, fmt.Errorf("order %s ended %s: %s", id, t.State, t.LastError)
			default:
				ends[id] = t.CompletedAt
			}
		}
		pending = still
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%d orders not ended: %w", len(pending), ctx.Err())
			case <-time.After(every):
			}
		}
	}
	return ends, nil
}

// Close stops the runner, the queues, moto and DynamoDB Local.
func (e *sasEngine) Close() error {
	if e.stop != nil {
		e.stop()
	}
	if e.queues != nil {
		_ = e.queues.Close()
	}
	if e.moto != nil {
		pid := e.moto.PID()
		if err := e.moto.Stop(); err != nil {
			return fmt.Errorf("stop moto (pid %d): %w", pid, err)
		}
		harness.Logf("stopped moto (pid %d)", pid)
	}
	if e.ddb != nil {
		pid := e.ddb.PID()
		if err := e.ddb.Stop(); err != nil {
			return fmt.Errorf("stop DynamoDB Local (pid %d): %w", pid, err)
		}
		harness.Logf("stopped DynamoDB Local (pid %d)", pid)
	}
	return nil
}
