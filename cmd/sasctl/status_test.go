package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A step whose attempts its flow control gave back shows them as waited,
// beside its attempts: waiting is not failing.
func TestStatusShowsTheAttemptsThatWaited(t *testing.T) {
	var out bytes.Buffer
	printRecords(&out, []operator.Record{
		{Name: "ocr", Kind: "agent", State: workflow.Processed, Step: statestore.Step{Rec: workflow.Rec{Action: workflow.Action{MaxFailures: 3}, Attempt: 19}, Wait: statestore.Wait{FlowWaits: 18}}},
		{Name: "pay", Kind: "agent", State: workflow.Processed, Step: statestore.Step{Rec: workflow.Rec{Action: workflow.Action{MaxFailures: 3}, Attempt: 2, FailureCount: 1}}},
	})
	require.Regexp(t, `ocr +step +Processed +19 \(18 waited\) +0/3`, out.String())
	require.Regexp(t, `pay +step +Processed +2 +1/3`, out.String())
}

// sasctl status names the steps an order keeps from an earlier version
// (migrate.keep): there for their undo only.
func TestStatusSaysWhatAnOrderKeeps(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	printStatus(&out, operator.Status{Order: operator.Order{OrderID: "o-1", State: workflow.Pending, Workflow: "approval", Version: "0afa372c"},
		Kept: map[string]string{"reserve-inventory": "8614e3d5"}})
	require.Contains(t, out.String(), "  keeps reserve-inventory, kept from version 8614e3d5 (undo only: done before a move, never run again)\n")
}
