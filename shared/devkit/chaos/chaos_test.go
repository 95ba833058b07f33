package chaos_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/chaos"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/localrun"
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
	generated, byApplicationID := map[workflow.State]int{}, 0
	for wf, e := range res.ByWorkflow {
		if strings.HasPrefix(wf, "shape") {
			for s, n := range e {
				generated[s] += n
			}
		}
		if k, err := strconv.Atoi(strings.TrimPrefix(wf, "shape")); err == nil && k%2 == 1 {
			byApplicationID += e[workflow.Processed]
		}
	}
	require.Positive(t, byApplicationID, "orders of generated shapes named by their applicationId (the odd ones) went through")
	// An order of 16 MB whose scan answers 16 MB, sealed, ran with the
	// others to its end: its result kept, read back whole by the steps
	// after it (no step failed for its size: TooLarge).
	require.Len(t, res.AtLimit, 1)
	if res.AtLimit[0].State != workflow.Processed {
		t.Logf("the handlers' log lines about %s:\n%s", res.AtLimit[0].OrderID, linesAbout(logs.String(), res.AtLimit[0].OrderID))
	}
	require.Equal(t, workflow.Processed, res.AtLimit[0].State, "%+v", res.AtLimit[0])
	require.Greater(t, res.AtLimit[0].ScanBytes, workflow.MaxResultLimit-8<<10, "its scan's 16 MB, kept in the bucket")
	require.Positive(t, res.Payloads.WrittenOver["order"], "sealed: orders sent by pointer written over once taken")
	require.Positive(t, res.Payloads.WrittenOver["event"], "and events")
	// Payloads of what encoders change went at each limit, their largest
	// message and item within SQS's and DynamoDB's (Violations.OverLimit).
	require.NotNil(t, res.Hostile)
	require.Positive(t, len(res.Hostile.Documents)+res.Hostile.AtLimit, "hostile large orders")
	require.Positive(t, len(res.Hostile.Approvals), "hostile approvals")
	require.Positive(t, res.Hostile.NotJSON, "answers not JSON")
	t.Logf("with hostile payloads: the largest message %d bytes (of the product's own %d), the largest item %d bytes",
		res.LargestMessage, res.LargestWorkMessage, res.LargestItem)
	// Orders moved to another version of their workflow in flight, some
	// back, every invariant held (each order judged by its own version).
	require.NotNil(t, res.Migrations)
	require.Positive(t, res.Migrations.Moved, "orders moved to their workflow's second version in flight")
	t.Logf("migrations: %d orders, %d tries, %d moved, %d back, refused %v", res.Migrations.Orders, res.Migrations.Tried,
		res.Migrations.Moved, res.Migrations.MovedBack, res.Migrations.Refused)
	// Searchable fields declared by the generated shapes, every value
	// searched at the end finding exactly its orders (sealed: kept as
	// keyed hashes), and bulk actions by query, each report adding up
	// (Violations.Unfound, BulkReports, ClearCopies).
	require.NotNil(t, res.Search)
	require.Positive(t, res.Search.Workflows, "shapes declare searchable fields")
	require.Positive(t, res.Search.Found, "searches found orders")
	require.Positive(t, res.Search.MidRun, "searches while the orders ran")
	require.NotNil(t, res.Bulk)
	require.Len(t, res.Bulk.Runs, plan.Bulk, "every bulk action reported: %v", res.Bulk.Errors)
	t.Logf("search: %+v; bulk: %+v", *res.Search, res.Bulk.Runs)
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

// TestFlowControlUnderChaosKeepsEveryInvariant runs a small plan whose
// orders mostly run on the flow shapes (rate limits, calls in flight per
// customer, holds on failure), with every fault, a pauser, a storm of 429s
// and an operator deciding held orders, on each state-store engine: every
// invariant holds, and the flow control's own. The delivered rate while a
// backlog lasted is logged, not asserted (it follows the machine's speed).
func TestFlowControlUnderChaosKeepsEveryInvariant(t *testing.T) {
	engines := map[string]*string{"DynamoDB Local": &dynamodbEndpoint}
	if os.Getenv("SAS_CHAOS_FLOW_MOTO") != "" {
		// moto's state store too (77 s on a loaded machine; it did not
		// drain within 3 minutes while the Supervisor held a lost message
		// back behind any delayed one, fixed since). CI runs it on
		// DynamoDB Local alone, to keep the run short.
		engines["moto"] = new(string)
	}
	for name, ddb := range engines {
		t.Run(name, func(t *testing.T) { // one after the other: both engines' runs share moto's SQS
			n := 40
			if v, err := strconv.Atoi(os.Getenv("SAS_CHAOS_FLOW_ORDERS")); err == nil && v > 0 {
				n = v
			}
			plan := chaos.DefaultPlan(20261126, n)
			plan.DynamoDBEndpoint = *ddb
			plan.Flow = chaos.DefaultFlow()
			// Most orders on the flow shapes, half their steps holding on
			// failure, more refusals: a few dozen orders show every kind.
			plan.Flow.Share, plan.Flow.Hold, plan.Permanent = 0.8, 0.5, 0.08
			// Half the flow orders of a hot customer, one call of a key at
			// once: calls queue in their key's line, the hot keys' of 141
			// and 200 bytes of what encoders change among them (Hostile).
			plan.Flow.Hot, plan.Flow.InFlight = 0.5, 1
			// Its data unsealed (the other chaos run seals them), half of
			// the other orders large: their steps' payloads are streamed
			// from the bucket to their services as they are read.
			plan.Seal, plan.Large = false, 0.5
			plan.Timeout = 3 * time.Minute
			var logs bytes.Buffer
			start := time.Now()
			res, err := chaos.Run(context.Background(), plan, endpoint, &logs, func(c localrun.Counts) {
				t.Logf("%5.0fs %d/%d ended, %d running, %d compensating", time.Since(start).Seconds(), c.Ended(), c.Total, c.Running,
					c.Compensating)
			})
			var table bytes.Buffer
			res.Print(&table)
			t.Logf("\n%s", table.String())
			if dir := os.Getenv("SAS_CHAOS_LOGS"); dir != "" { // the handlers' logs, to read a failure
				require.NoError(t, os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log"), logs.Bytes(), 0o644))
			}
			require.NoError(t, err)
			require.True(t, res.Checked)
			// A rate short of its rate in a backlog is a speed, judged by
			// the report (sasctl chaos fails on it), not by this test: a
			// starved machine delivers less. Its judging is tested alone
			// (TestARateIsShortOnlyOverALongEnoughBacklog).
			v := res.Violations
			v.RateShort = nil
			require.Zero(t, v.Count(), "invariants broken:\n%s", table.String())
			f := res.Flow
			require.NotNil(t, f)
			require.Positive(t, f.Pauses, "an agent was paused and resumed")
			require.Positive(t, f.Throttled, "its service answered 429s")
			require.Positive(t, f.Holds, "orders were held on failure")
			require.NotEmpty(t, f.Rates)
			for _, rf := range f.Rates {
				require.Positive(t, rf.Calls, rf.Agent)
				require.LessOrEqual(t, rf.Most, rf.Bound, rf.Agent)
			}
			require.Positive(t, f.Keys)
			require.Positive(t, res.Payloads.Streamed, "payloads streamed to their services as they were read")
			require.NotNil(t, res.Bulk)
			require.Len(t, res.Bulk.Runs, plan.Bulk, "held orders retried and undone by query among them: %v", res.Bulk.Errors)
		})
	}
}

// linesAbout are the lines of logs that name id, each cut at 600 bytes, the
// last 400 of them at most.
func linesAbout(logs, id string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, id) {
			if len(l) > 600 {
				l = l[:600] + "…"
			}
			out = append(out, l)
		}
	}
	return strings.Join(out[max(0, len(out)-400):], "\n")
}
