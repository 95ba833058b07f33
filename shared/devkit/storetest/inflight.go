package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// inFlightTests are the cases of listing the orders in flight from the
// deadline index.
var inFlightTests = map[string]func(*testing.T, *statestore.Store){
	"InFlightListsFromTheIndexPaged": inFlightPaged,
	"InFlightRefusesABadPageToken":   inFlightBadToken,
}

// inFlightPaged: the orders at work (Pending, Compensating) are listed, page
// by page across the index's shards, each once; ended ones are not, even one
// still in the index for its unconfirmed alert.
func inFlightPaged(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	inFlightOrders(t, s)
	got := map[string]workflow.State{}
	token := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging ends")
		tasks, next, err := s.InFlight(ctx, 2, token)
		require.NoError(t, err)
		require.LessOrEqual(t, len(tasks), 2)
		for _, task := range tasks {
			require.NotContains(t, got, task.OrderID, "listed once")
			got[task.OrderID] = task.State
		}
		if next == "" {
			break
		}
		token = next
	}
	require.Equal(t, map[string]workflow.State{"o-0": workflow.Pending, "o-3": workflow.Compensating,
		"o-4": workflow.Pending, "o-5": workflow.Pending, "o-6": workflow.Pending}, got)
	all, next, err := s.InFlight(ctx, 100, "")
	require.NoError(t, err)
	require.Len(t, all, 5)
	require.Empty(t, next)
	n, err := s.CountInFlight(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, n, "the five in flight, and o-2 until its alert is confirmed")
}

// inFlightOrders submits o-0 … o-6 (two steps each): o-1 ends Processed (it
// leaves the index); o-2 fails on its first step and ends Failed with its
// alert unconfirmed (it stays in the index); o-3 compensates (its second step
// failed, its first one's undo is ready); the others are Pending.
func inFlightOrders(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for i := range 7 {
		submit(t, s, fmt.Sprintf("o-%d", i), 2)
	}
	for _, r := range []workflow.Ref{step0, step1} {
		run(t, s, "o-1", r, t0)
	}
	st, err := claim(ctx, s, "o-2", step0, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-2", step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	run(t, s, "o-3", step0, t0)
	st, err = claim(ctx, s, "o-3", step1, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-3", step1, st.Attempt, "no stock", t0)
	require.NoError(t, err)
}

func inFlightBadToken(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for _, token := range []string{"not base64!", "bm90IGpzb24", "eyJzIjo5OX0"} { // "not json", {"s":99}
		_, _, err := s.InFlight(ctx, 10, token)
		require.ErrorIs(t, err, statestore.ErrBadPageToken, token)
	}
	_, _, err := s.SearchTasks(ctx, statestore.TaskFilter{State: workflow.Failed}, 10, "bm90IGpzb24")
	require.ErrorIs(t, err, statestore.ErrBadPageToken)
}
