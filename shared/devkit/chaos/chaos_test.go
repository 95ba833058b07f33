package chaos_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/chaos"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/workflow"
)

var endpoint, dynamodbEndpoint string

// moto for SQS and SNS, DynamoDB Local (AWS's engine, many requests at once)
// for the state store: moto serves one request at a time.
func TestMain(m *testing.M) {
	os.Exit(emulatortest.MainWithMotoAndDynamoDBLocal(m, &endpoint, &dynamodbEndpoint))
}

// TestChaosRunKeepsEveryInvariant is the seeded chaos run CI makes on every
// build: every fault the design names, at once, and every invariant checked.
func TestChaosRunKeepsEveryInvariant(t *testing.T) {
	var logs bytes.Buffer
	plan := chaos.DefaultPlan(20261121, 200)
	plan.DynamoDBEndpoint = dynamodbEndpoint
	res, err := chaos.Run(context.Background(), plan, endpoint, &logs, nil)
	var table bytes.Buffer
	res.Print(&table)
	t.Logf("\n%s", table.String())
	require.NoError(t, err)
	require.True(t, res.Checked)
	require.Zero(t, res.Violations.Count(), "invariants broken:\n%s", table.String())
	ended := res.EndStates[workflow.Processed] + res.EndStates[workflow.Failed] + res.EndStates[workflow.CompensationFailed] +
		res.EndStates[workflow.Cancelled]
	require.Equal(t, 200, ended)

	// The chaos happened: every kind of fault was injected.
	kinds := strings.Join(keys(res.Faults), "\n")
	for _, k := range []string{"message dropped", "message delayed", "message delivered twice",
		"handler killed at submission.after-commit", "handler killed at agent.after-claim",
		"handler killed at agent.after-record", "handler killed at agent.after-call",
		"remote transient error", "remote call hung", "remote call slowed past CompleteBy", "remote refused for good",
		"order cancelled (a cancel message sent)", "agent paused before recording its outcome",
		"approval early", "approval late", "approval twice", "approval never"} {
		require.Contains(t, kinds, k)
	}
	require.Positive(t, res.Recoveries)
	require.Positive(t, res.Compensations)
	require.Positive(t, res.StaleReplies, "a paused Agent's outcome, after the next attempt was claimed, fenced off")
	require.Positive(t, res.EndStates[workflow.Failed])
	require.Positive(t, res.EndStates[workflow.Cancelled], "some cancels landed before the point of no return")
	for _, wf := range []string{"order", chaos.WaitsWorkflow, workflow.ParallelWorkflow} {
		require.Positive(t, res.ByWorkflow[wf][workflow.Processed], "%s orders went through", wf)
	}
	require.Positive(t, res.ByWorkflow[workflow.ParallelWorkflow][workflow.Failed]+res.ByWorkflow[workflow.ParallelWorkflow][workflow.Cancelled],
		"some parallel orders were undone")
	generated := map[workflow.State]int{}
	for wf, e := range res.ByWorkflow {
		if strings.HasPrefix(wf, "shape") {
			for s, n := range e {
				generated[s] += n
			}
		}
	}
	require.Positive(t, generated[workflow.Processed], "orders of generated shapes went through")
	require.Positive(t, generated[workflow.Failed]+generated[workflow.Cancelled]+generated[workflow.CompensationFailed],
		"and some were undone")
}

func keys(m map[string]int) []string {
	var out []string
	for k, v := range m {
		if v > 0 {
			out = append(out, k)
		}
	}
	return out
}
