// Command temporal is the peers benchmark's Temporal engine: Temporal's
// server in this process, as its temporaltest package runs it (its
// frontend on loopback; SQLite in memory, or in a file for --child
// temporal-file), a worker with Temporal's default options, and the order
// as a workflow of three activities. The peers program
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
	"path/filepath"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/log"

	"github.com/sas-go/sas/shared/devkit/peers/harness"
	"github.com/sas-go/sas/shared/devkit/peers/temporal/third_party/lite"
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
	err := harness.RunChild(ctx, c, "Go process (server, worker)", func(ctx context.Context) (harness.Engine, error) {
		switch c.Engine {
		case "temporal":
			return start(ctx, svc, "")
		case "temporal-file":
			return start(ctx, svc, filepath.Join(c.RunDir, "temporal.db"))
		}
		return nil, fmt.Errorf("--child %s: this program runs temporal and temporal-file", c.Engine)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
}

// engine is the running server, its client and worker.
type engine struct {
	server *lite.LiteServer
	client client.Client
	worker worker.Worker
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

// namespace is the one namespace the server is made with.
const namespace = "peers"

// start starts the server (SQLite in memory, or in the file dbFile, made
// anew), a client and a worker.
func start(ctx context.Context, svc *harness.Service, dbFile string) (_ *engine, err error) {
	cfg := &lite.LiteServerConfig{Ephemeral: dbFile == "", DatabaseFilePath: dbFile, FrontendIP: "127.0.0.1",
		Namespaces: []string{namespace}, Logger: log.NewNoopLogger()}
	where := "SQLite in memory"
	if dbFile != "" {
		if err := os.Remove(dbFile); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("remove the last run's database: %w", err)
		}
		where = "SQLite in " + dbFile
	}
	e := &engine{}
	if e.server, err = lite.NewLiteServer(cfg); err != nil {
		return nil, fmt.Errorf("make the Temporal server: %w", err)
	}
	if err := e.server.Start(); err != nil {
		return nil, fmt.Errorf("start the Temporal server: %w", err)
	}
	harness.Logf("Temporal server in process, frontend on %s, %s", e.server.FrontendHostPort(), where)
	quiet := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if e.client, err = e.server.NewClientWithOptions(dctx, client.Options{Namespace: namespace, Logger: quiet}); err != nil {
		_ = e.server.Stop()
		return nil, fmt.Errorf("Temporal client: %w", err)
	}
	e.worker = worker.New(e.client, taskQueue, worker.Options{})
	e.worker.RegisterWorkflow(order)
	e.worker.RegisterActivity(&activities{svc: svc})
	if err := e.worker.Start(); err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("Temporal worker: %w", err)
	}
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
func (e *engine) Close() error {
	if e.worker != nil {
		e.worker.Stop()
	}
	e.client.Close()
	if err := e.server.Stop(); err != nil {
		return fmt.Errorf("stop the Temporal server: %w", err)
	}
	return nil
}
