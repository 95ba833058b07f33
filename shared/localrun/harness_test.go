package localrun_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/emulator"
	"github.com/sas-go/sas/shared/emulator/emulatortest"
	"github.com/sas-go/sas/shared/localrun"
	"github.com/sas-go/sas/shared/remotesim"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

var motoEndpoint string

func TestMain(m *testing.M) {
	code := func() int {
		p, err := emulatortest.Moto(context.Background())
		if err != nil {
			return emulatortest.Fail(err)
		}
		defer p.Stop()
		motoEndpoint = p.Endpoint
		return m.Run()
	}()
	os.Exit(code)
}

var prefixSeq atomic.Int64

// env is one test's pipeline: its own resources on the shared moto server,
// its own remote simulator, and a running local runner.
type env struct {
	t     *testing.T
	stack *localrun.Stack
	sim   *remotesim.Simulator
	logs  *syncBuffer
	stop  func() // kills the runner (as a crash would) and waits for it
}

// fast settings keep the tests quick but leave room on a loaded 2-core machine.
func fastSettings() workflow.Settings {
	return workflow.Settings{StepTimeout: 3 * time.Second, MaxFailures: 3, RetryBackoff: 0, PickupTimeout: 2 * time.Second}
}

func newEnv(t *testing.T, faults remotesim.Faults, tweak func(*localrun.Options)) *env {
	t.Helper()
	sim := remotesim.New(uint64(prefixSeq.Load() + 1))
	sim.SetFaults("", faults)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	logs := &syncBuffer{}
	o := localrun.Options{
		Endpoint: motoEndpoint, Prefix: fmt.Sprintf("it%d-%d", time.Now().UnixNano()%1e6, prefixSeq.Add(1)),
		Settings: fastSettings(), RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second,
		SupervisorEvery: 200 * time.Millisecond,
		Log:             slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(&o)
	}
	stack, err := localrun.New(context.Background(), o)
	require.NoError(t, err)
	e := &env{t: t, stack: stack, sim: sim, logs: logs}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("handler logs:\n%s", logs.Tail(60_000))
		}
	})
	e.start()
	t.Cleanup(func() { e.stop() })
	return e
}

// start runs a fresh runner (new handler instances).
func (e *env) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.stack.Run(ctx) }()
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); <-done }) }
}

// orders sends n well-formed orders and returns their ids.
func (e *env) orders(n int) []string {
	e.t.Helper()
	var ids, bodies []string
	for i := range n {
		id := fmt.Sprintf("order-%03d", i)
		ids = append(ids, id)
		bodies = append(bodies, localrun.DemoOrder(id, i).JSON())
	}
	require.NoError(e.t, e.stack.SendOrders(context.Background(), bodies...))
	return ids
}

// waitEnded waits (bounded) until every order's task ended.
func (e *env) waitEnded(ids []string) map[string]statestore.Task {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tasks, err := e.stack.WaitEnded(ctx, ids, 100*time.Millisecond, nil)
	require.NoError(e.t, err)
	return tasks
}

// eventually waits until cond holds, polling; it fails the test after limit.
func (e *env) eventually(what string, limit time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) step(id string) statestore.Step {
	e.t.Helper()
	_, steps, err := e.stack.Store.Load(context.Background(), id)
	require.NoError(e.t, err)
	require.Len(e.t, steps, 1)
	return steps[0]
}

// requireEffectsOnce asserts invariant 5: the remote service applied exactly
// one effect per order for the listed orders, and none for the others.
func (e *env) requireEffectsOnce(applied []string, notApplied ...string) {
	e.t.Helper()
	per := map[string]int{}
	for _, eff := range e.sim.Ledger() {
		per[eff.OrderID]++
	}
	for _, id := range applied {
		require.Equal(e.t, 1, per[id], "effects applied for %s", id)
	}
	for _, id := range notApplied {
		require.Zero(e.t, per[id], "effects applied for %s", id)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

var _ = emulator.FreePort
