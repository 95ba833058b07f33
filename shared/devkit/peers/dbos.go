package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/sas-go/sas/shared/devkit/peers/harness"
)

// dbosOrder is the input of DBOS's order workflow.
type dbosOrder struct {
	ID, Body string
}

// dbosEngine is DBOS Transact for Go in this process, its system database
// on a PostgreSQL it started (fsync on, PostgreSQL's default): each order a
// durable workflow of three steps, each step checkpointed before the next.
type dbosEngine struct {
	pg   *postgres
	svc  *harness.Service
	ctx  dbos.Context
	runs harness.Handles[dbos.WorkflowHandle[string]]
}

// startDBOS starts PostgreSQL in a fresh folder under dir, then DBOS on it,
// its steps calling svc.
func startDBOS(ctx context.Context, svc *harness.Service, dir string) (_ *dbosEngine, err error) {
	e := &dbosEngine{svc: svc}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	if e.pg, err = startPostgres(ctx, dir); err != nil {
		return nil, err
	}
	e.ctx, err = dbos.NewContext(ctx, dbos.Config{AppName: "sas-peers", DatabaseURL: e.pg.url("dbos_peers"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, fmt.Errorf("DBOS context: %w", err)
	}
	dbos.RegisterWorkflow(e.ctx, e.order)
	if err := dbos.Launch(e.ctx); err != nil {
		return nil, fmt.Errorf("launch DBOS: %w", err)
	}
	return e, nil
}

// order is the order's workflow: its steps one after another.
func (e *dbosEngine) order(ctx dbos.Context, o dbosOrder) (string, error) {
	for _, s := range harness.Steps {
		_, err := dbos.RunAsStep(ctx, func(c context.Context) (string, error) {
			return "", e.svc.Call(c, o.ID, s.Action, s.Service, o.Body)
		}, dbos.WithStepName(s.Action))
		if err != nil {
			return "", err
		}
	}
	return "done", nil
}

// Start starts each order's workflow.
func (e *dbosEngine) Start(_ context.Context, ids []string) error {
	return e.runs.Start(ids, func(id, body string) (dbos.WorkflowHandle[string], error) {
		return dbos.RunWorkflow(e.ctx, e.order, dbosOrder{ID: id, Body: body}, dbos.WithWorkflowID(id))
	})
}

// Wait waits for each workflow's result.
func (e *dbosEngine) Wait(_ context.Context, ids []string) (map[string]time.Time, error) {
	return e.runs.Wait(ids, func(h dbos.WorkflowHandle[string]) error {
		_, err := h.GetResult()
		return err
	})
}

// Close shuts DBOS down, then PostgreSQL.
func (e *dbosEngine) Close() error {
	if e.ctx != nil {
		if err := dbos.Shutdown(e.ctx, 5*time.Second); err != nil {
			harness.Logf("DBOS shutdown: %v", err)
		}
	}
	if e.pg != nil {
		return e.pg.stop()
	}
	return nil
}
