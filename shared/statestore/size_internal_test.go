package statestore

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// A large order (MaxSteps steps, one of them per item of MaxForEachItems,
// every step with an undo), and MaxRecords records like its,
// keeps its state item well within DynamoDB's 400 KB, at its end too, when
// every record carries its claim, its times and an incident: the limits'
// margin, as docs/design.md says.
func TestTheLargestOrderFitsAnItemWithMargin(t *testing.T) {
	t.Parallel()
	act := func(i int) workflow.Action {
		return workflow.Action{Name: fmt.Sprintf("a-step-with-a-long-name-%02d", i), Agent: "warehouse-east", Do: "reserve-inventory-lines",
			Timeout: time.Minute, MaxFailures: 5, RetryBackoff: 5 * time.Second}
	}
	d := workflow.Definition{Name: "largest", PickupTimeout: time.Minute, Deadline: 24 * time.Hour}
	steps := workflow.MaxSteps
	for i := range steps {
		u := act(100 + i)
		st := workflow.Step{Action: act(i), Undo: &u, NoNeeds: true}
		if i == 1 {
			st.ForEach = "items"
		}
		d.Steps = append(d.Steps, st)
	}
	sub := Submission{OrderID: "order-0123456789-abcdefghij", Workflow: d, Items: map[int]int{1: workflow.MaxForEachItems},
		Now: time.UnixMilli(1_800_000_000_000)}
	it := stateItem{OrderID: sub.OrderID, SK: taskSK, Workflow: d.Name, WfVersion: "0123abcd", State: "Compensating", Round: 1,
		ItemsDone: map[string]int{"1": workflow.MaxForEachItems}, Recs: records(sub, ms(sub.Now))}
	require.LessOrEqual(t, len(it.Recs), workflow.MaxRecords)
	at := ms(sub.Now)
	for sk, r := range it.Recs { // every record run, done, with an incident
		r.State, r.Attempt, r.FailureCount, r.LockedBy = "Processed", 2, 1, "0123456789ab"
		r.CompleteBy, r.DueAt, r.ReadyAt, r.ClaimedAt, r.DoneAt, r.Result = at, at, at, at, at, 812
		r.Incidents = []string{incident(sub.Now, "recovered by the supervisor (failure 1): attempt 1 (0123456789ab) not completed by 2026-11-25T09:00:00Z")}
		it.Recs[sk] = r
	}
	av, err := attributevalue.MarshalMap(it)
	require.NoError(t, err)
	size := ItemSize(av)
	t.Logf("%d records (%d steps, %d items): %d bytes at the end, %.0f bytes a record", len(it.Recs), steps,
		workflow.MaxForEachItems, size, float64(size)/float64(len(it.Recs)))
	perRecord := size / len(it.Recs)
	require.Less(t, workflow.MaxRecords*perRecord, 400*1024/3, "MaxRecords such records: a third of DynamoDB's 400 KB at most")
}
