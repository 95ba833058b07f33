package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// An order's records on one time axis: each record's wait for its claim,
// its attempt, a wait for an event as bars in proportion to the order's
// span; its history as ticks; a record never made ready has no row.
func TestTheWaterfallDrawsEachRecordOnOneTimeAxis(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	st := operator.Status{
		Order: operator.Order{OrderID: "o-1", State: workflow.Processed, CreatedAt: t0, CompletedAt: at(10)},
		Records: []operator.Record{
			{Name: "reserve", Kind: "agent", State: workflow.Processed, Step: statestore.Step{Rec: workflow.Rec{Attempt: 1, DoneAt: at(2)}, AtWork: statestore.AtWork{ClaimedAt: at(1)}, Wait: statestore.Wait{ReadyAt: at(0)}}},
			{Name: "approve", Kind: "event", State: workflow.Processed, Step: statestore.Step{Rec: workflow.Rec{DoneAt: at(8)}, Wait: statestore.Wait{ReadyAt: at(2)}}},
			{Name: "charge", Kind: "agent", State: workflow.Processed, Step: statestore.Step{Rec: workflow.Rec{Attempt: 2, DoneAt: at(10)}, AtWork: statestore.AtWork{ClaimedAt: at(9)}, Wait: statestore.Wait{ReadyAt: at(8)}}},
			{Name: "refund", Kind: "agent", State: workflow.Pending, Step: statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Undo: true}}}},
		},
		Timeline: []operator.Event{{At: at(8.5), Record: "charge", What: "recovered by the supervisor (failure 1)"}},
	}
	w := waterfallOf(st, at(100))
	require.Len(t, w.Rows, 3, "the undo never ran: no row")
	x := func(s float64) int { return fallLabelW + int(float64(fallAxisW)*s/10) }
	reserve := w.Rows[0]
	require.Equal(t, []fallBar{
		{X: x(0), W: x(1) - x(0), Class: "queue", Title: "ready, waiting for its claim: 10:00:00.000 → 10:00:01.000 (1s)"},
		{X: x(1), W: x(2) - x(1), Class: "run", Title: "attempt 1: 10:00:01.000 → 10:00:02.000 (1s)"},
	}, reserve.Bars)
	approve := w.Rows[1]
	require.Len(t, approve.Bars, 1)
	require.Equal(t, "wait", approve.Bars[0].Class)
	require.Equal(t, x(2), approve.Bars[0].X)
	require.Equal(t, x(8)-x(2), approve.Bars[0].W)
	charge := w.Rows[2]
	require.Equal(t, []fallTick{{X: x(8.5), Title: "10:00:08.500 recovered by the supervisor (failure 1)"}}, charge.Ticks)
	require.Equal(t, "10s", w.Span, "the order's span: its end, not now")
	require.Equal(t, x(10), w.Axis[4].X)
	for i := 1; i < len(w.Rows); i++ {
		require.Greater(t, w.Rows[i].Y, w.Rows[i-1].Y)
	}

	// In flight: up to now, a claimed attempt's bar runs to now.
	st.Order.CompletedAt, st.Records[2].DoneAt, st.Records[2].State = time.Time{}, time.Time{}, workflow.Processing
	w = waterfallOf(st, at(20))
	require.Equal(t, fallLabelW+fallAxisW*9/20, w.Rows[2].Bars[1].X, "scaled to the 20 s so far")
	require.Equal(t, fallLabelW+fallAxisW, w.Rows[2].Bars[1].X+w.Rows[2].Bars[1].W, "its attempt runs to now, the axis's end")
}
