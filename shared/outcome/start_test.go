package outcome_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// timerStore is a state store of one order whose first step is a timer: its
// Inputs are the order and a result of weight bytes before it (which the
// Starter's boundary reserves before it reads them), and Arm notes when the
// timer was armed for.
type timerStore struct {
	weight int64
	armed  time.Time // the due Arm was asked for
	open   error     // what reading the document's inputs says (nil: they are read)
}

func (s *timerStore) Load(context.Context, string) (statestore.Task, []statestore.Step, error) {
	return statestore.Task{}, []statestore.Step{{Rec: workflow.Rec{Ref: workflow.Ref{Index: 0}, Action: workflow.Action{Name: "ship-after"}},
		OrderOf: statestore.OrderOf{OrderID: "o-1"}}}, nil
}

func (s *timerStore) Inputs(_ context.Context, _ statestore.Step, order kept.Value) (kept.Inputs, error) {
	if s.open != nil {
		return kept.Inputs{}, s.open
	}
	pad := kept.Stored([]byte(`"` + strings.Repeat("p", int(max(s.weight-2, 0))) + `"`))
	return kept.Inputs{OrderID: "o-1", Order: order, Results: []kept.Part{{Name: "before", Value: pad}}}, nil
}

func (s *timerStore) Order(context.Context, string) (string, error) {
	return "", errors.New("not read")
}

func (s *timerStore) Arm(_ context.Context, _ string, _ workflow.Ref, _ workflow.Kind, due, _ time.Time, _ string) (statestore.Step, map[string]string, error) {
	s.armed = due
	return statestore.Step{}, nil, statestore.ErrStale // armed already: nothing more to start here
}

// timerWorkflow is a workflow of one timer, until the order's at.
func timerWorkflow(t *testing.T) workflow.Definition {
	t.Helper()
	def, err := workflow.ParseFile("timer.yaml", []byte(`name: timer
deadline: 1h
steps:
  - name: ship-after
    until: .order.at
`), workflow.Options{})
	require.NoError(t, err)
	return def
}

// A timer's until over a document larger than its function reads at once
// (the Scheduler's, Submission's budget) fails its step at once, with the
// reason, rather than being tried again for ever; within the budget, the
// timer is armed for the time the document gives.
func TestATimersUntilReadsItsDocumentWithinItsFunctionsBudget(t *testing.T) {
	def, now := timerWorkflow(t), time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	order := json.RawMessage(`{"orderId":"o-1","at":"2026-11-27T12:00:00Z"}`)
	start := func(b *kept.Budget, weight int64) (*timerStore, string) {
		s := &timerStore{weight: weight}
		var logs strings.Builder
		_, err := outcome.Starter{Store: s, Budget: b, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(&logs, nil))}.
			Start(context.Background(), def, "o-1", []workflow.Ref{{Index: 0}}, order)
		require.NoError(t, err)
		return s, logs.String()
	}

	over, logged := start(kept.NewBudget(1<<20), 2<<20)
	require.Contains(t, logged, (&kept.DocumentError{Bytes: int64(len(order)) + 2<<20, Max: 1 << 20}).Error(),
		"the document reserved of the function's budget")
	require.Equal(t, now, over.armed, "refused: due now, not at the time it would give")

	within, logged := start(kept.NewBudget(1<<20), 1<<10)
	require.NotContains(t, logged, "gave no time")
	require.Equal(t, time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), within.armed.UTC())
}

// A timer's until over a sealed order on a function with no data key (its
// configuration lags a deploy that added it) is tried again, nothing
// armed, for one that has it; sealed data that does not open fails the
// step at once, as any fault of the order.
func TestATimerOfASealedOrderWaitsForAFunctionWithItsKey(t *testing.T) {
	def, now := timerWorkflow(t), time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	start := func(open error) (*timerStore, error) {
		s := &timerStore{open: open}
		_, err := outcome.Starter{Store: s, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)}.
			Start(context.Background(), def, "o-1", []workflow.Ref{{Index: 0}}, json.RawMessage(`{"orderId":"o-1"}`))
		return s, err
	}
	noKey, err := start(&seal.Error{OrderID: "o-1", Reason: "this function has no data key (dataKey) to open it", NoKey: true})
	require.ErrorContains(t, err, "no data key", "tried again")
	require.True(t, noKey.armed.IsZero(), "nothing armed")
	broken, err := start(&seal.Error{OrderID: "o-1", Reason: "it does not open: altered, or another order's"})
	require.NoError(t, err)
	require.Equal(t, now, broken.armed, "refused: due now")
}
