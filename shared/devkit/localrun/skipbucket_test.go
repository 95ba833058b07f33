package localrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/workflow"
)

// An operator's skip, with a result over the inline limit, of a held step
// of an order that keeps payloads in the bucket keeps that result in the
// bucket the order's claim checks name, whatever bucket the operator was
// told (another, or none: on AWS the stack's bucket has a name
// CloudFormation makes, which sasctl's default, the local stack's, is
// not); the next step reads it. An order that keeps nothing in the
// bucket, skipped so by an operator told no bucket, is refused with what
// to set, and nothing is decided.
func TestASkipsLargeResultGoesToTheBucketItsOrderNames(t *testing.T) {
	t.Parallel()
	flow := strings.Replace(largeFlow, "  - name: scan\n    agent: scans\n", "  - name: scan\n    agent: scans\n    onFailure: hold\n", 1)
	e, svc := largeEnv(t, flow, nil)
	ctx := context.Background()
	big := strings.Replace(largeOrder("skip-big", 100<<10, 10), `"answer"`, `"refuse":"scan","answer"`, 1)
	e.send(e.stack.Topology().OrdersQueue().Name, big,
		`{"orderId":"skip-small","workflow":"large","answer":10,"doc":"d","refuse":"scan"}`)
	for _, id := range []string{"skip-big", "skip-small"} {
		e.eventually(id+" held", time.Minute, func() bool {
			task, _, err := e.stack.Store.Load(ctx, id)
			return err == nil && task.State == workflow.Held
		})
	}
	stored, err := e.stack.Store.Order(ctx, "skip-big")
	require.NoError(t, err)
	require.True(t, isCheck([]byte(stored)), "skip-big keeps its order in the bucket")

	answer := `{"pages":"` + pages(100<<10) + `"}`
	skip := func(id string) outcome.HoldDecision {
		return outcome.HoldDecision{OrderID: id, Action: outcome.HoldSkip, Step: "scan", Result: json.RawMessage(answer), By: "test"}
	}
	elsewhere := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	elsewhere.PayloadBucket = "not-this-deployments-bucket"
	_, err = elsewhere.DecideHeld(ctx, skip("skip-big"))
	require.NoError(t, err)
	results, err := e.stack.Store.Results(ctx, "skip-big", 1)
	require.NoError(t, err)
	ref, ok := payload.Parse(results[workflow.Ref{Index: 0}].JSON)
	require.True(t, ok, "the result over the inline limit is kept by claim check")
	require.Equal(t, e.stack.Resources.PayloadBucket, ref.Bucket, "in the bucket the order's claim checks name")
	require.Equal(t, workflow.Failed, e.waitEndedWithin([]string{"skip-big"}, 2*time.Minute)["skip-big"].State,
		"file ran on the skip's result, ship refuses, and what ran is undone")
	in, ok := svc.of("skip-big", "file")
	require.True(t, ok, "file ran after the skip")
	require.Equal(t, sum(pages(100<<10)), in.scanPages, "file read the skip's result back whole")

	// A result in the product's own form (a claim check naming any
	// bucket) is no result: refused, nothing decided.
	forged := skip("skip-small")
	forged.Result = json.RawMessage(`{"$sasPayload":{"bucket":"other","key":"orders/x","bytes":3}}`)
	var held *workflow.HeldError
	_, err = operator.New(e.stack.Deployment.Clients, e.stack.Topology()).DecideHeld(ctx, forged)
	require.ErrorAs(t, err, &held)
	require.ErrorContains(t, err, "in the product's own form")
	// Nor is one that is not JSON with one meaning in UTF-8, as an Agent
	// keeps a service's answer: a byte that is not UTF-8 would be kept as
	// U+FFFD (other data than weighed), a member twice read two ways.
	for _, bad := range []string{"{\"a\":\"\xff\"}", `{"a":1,"a":2}`} {
		odd := skip("skip-small")
		odd.Result = json.RawMessage(bad)
		_, err = operator.New(e.stack.Deployment.Clients, e.stack.Topology()).DecideHeld(ctx, odd)
		require.ErrorAs(t, err, &held, bad)
		require.ErrorContains(t, err, operator.ResultNotJSON)
	}

	none := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	none.PayloadBucket = ""
	_, err = none.DecideHeld(ctx, skip("skip-small"))
	require.True(t, errors.Is(err, operator.ErrNoPayloadBucket), "%v", err)
	require.ErrorContains(t, err, "set --payload-bucket (or $SAS_PAYLOAD_BUCKET")
	task, _, err := e.stack.Store.Load(ctx, "skip-small")
	require.NoError(t, err)
	require.Equal(t, workflow.Held, task.State, "nothing decided")
}

// forEachFlow is largeFlow with its scan a step per document of the order,
// the steps after it given what the scans service reads.
const forEachFlow = `
name: large
resultLimit: 16MB
deadline: 10m
pickupTimeout: 30s
defaults: {timeout: 20s, maxFailures: 2}
agents:
  scans: {custom: true}
steps:
  - name: scan
    agent: scans
    forEach: docs
    input: '{order: .order}'
    undo: {name: unscan, input: '{order: .order, result: .result}'}
  - name: file
    agent: scans
    input: '{order: .order, results: {scan: .results.scan[1]}}'
    undo: {name: unfile, input: '{order: .order}'}
  - name: ship
    agent: scans
`

// An order whose forEach step's results are kept in the bucket (their keys
// hold "#": results/scan#1-r1/…) is resubmitted once it failed: its
// payloads are renewed (written again in place, S3's copy source
// URL-encoded), and its new round runs. Every operator decision on such an
// order failed with CopyObject 404 NoSuchKey: "#" cut the copy source.
func TestAnOrderWithForEachResultsInTheBucketIsResubmitted(t *testing.T) {
	t.Parallel()
	e, svc := largeEnv(t, forEachFlow, nil)
	ctx := context.Background()
	const id = "fe.1:a-b_c"
	e.send(e.stack.Topology().OrdersQueue().Name, `{"orderId":"`+id+`","workflow":"large","answer":40960,"doc":"d","docs":[1,2]}`)
	require.Equal(t, workflow.Failed, e.waitEndedWithin([]string{id}, 2*time.Minute)[id].State, "ship refuses: what ran is undone")
	results, err := e.stack.Store.Results(ctx, id, 1)
	require.NoError(t, err)
	ref, ok := payload.Parse(results[workflow.Ref{Index: 0, Item: 2}].JSON)
	require.True(t, ok, "an item's result of 40 KB, kept in the bucket")
	require.Contains(t, ref.Key, "/results/scan#2-r1/")

	_, err = e.operatorOf().Resubmit(ctx, id, "")
	require.NoError(t, err)
	e.eventually("round 2 ended", 2*time.Minute, func() bool {
		task, _, err := e.stack.Store.Load(ctx, id)
		return err == nil && task.Round == 2 && task.State == workflow.Failed
	})
	in, ok := svc.of(id, "file")
	require.True(t, ok, "file ran")
	require.Equal(t, sum(pages(40960)), in.scanPages, "on its results")
}
