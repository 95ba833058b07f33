package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// What becomes of an attempt is judged from what came of its call, or of
// what came before it, alone: every case the Agent meets, each named for
// what it does, without AWS, a store or a clock.
func TestJudge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &statestore.Step{OrderID: "o-1", Name: "charge-payment", CompleteBy: now.Add(time.Minute)}
	plain := func() *attempt { return &attempt{st: st, deadline: st.CompleteBy.Add(-100 * time.Millisecond)} }
	async := func() *attempt { a := plain(); a.action.Async = true; return a }
	sealed := func() *attempt { a := plain(); a.sealed = true; return a }
	gated := func() *attempt { a := plain(); a.gated = true; return a }
	made := called{made: true, at: now}
	retried := called{made: true, retried: true, at: now}
	late := called{made: true, retried: true, at: st.CompleteBy}

	expr := &PermanentError{Body: "charge-payment's input: " + (&workflow.ExpressionError{What: ".card", Reason: "card 4111 is no object"}).Error(),
		Cause: &workflow.ExpressionError{What: ".card", Reason: "card 4111 is no object"}}
	storeDown := errors.New("the state store failed")
	line := &waitError{flow.Verdict{Wait: 5 * time.Second, Why: `waiting for a slot of key "k1" (2nd in line)`}}
	gone := &InputError{Err: &kept.DocumentError{Bytes: 40 << 20, Max: 32 << 20}}
	denied := &InputError{Err: &smithy.GenericAPIError{Code: "AccessDenied"}}
	s3Blip := &InputError{Err: &smithy.GenericAPIError{Code: "SlowDown"}}
	slow := &SlowDownError{Status: 429, After: 30 * time.Second, Text: "429: slow down"}
	open := &BreakerOpenError{Agent: "payment", Wait: 7 * time.Second}
	shut := &BreakerOpenError{Agent: "payment", Wait: -time.Second}
	refused := &PermanentError{Status: 422, Body: strings.Repeat("no ", MaxRefusalBytes)}
	outOfTime := pastDeadline(errDeadline, nil)
	answeredLast := pastDeadline(errDeadline, errors.New("remote 503"))

	cases := []struct {
		name string
		a    *attempt
		c    called
		err  error
		want verdict
	}{
		// Before its call: what prepare met instead.
		{"an input that cannot be given is refused, having run nothing", plain(), called{}, expr,
			verdict{kind: recordRefusal, refusal: expr.Error()}},
		{"a sealed order's refusal before its call quotes no jq expression's message", sealed(), called{}, expr,
			verdict{kind: recordRefusal, refusal: workflow.QuotingNoData(expr)}},
		{"an expression out of time ends the attempt now, for the Supervisor's next sweep", plain(), called{},
			fmt.Errorf("input: %w", workflow.ErrExpressionTimeout), verdict{kind: abandonNow,
				why: "input: " + workflow.ErrExpressionTimeout.Error(), reason: "input: " + workflow.ErrExpressionTimeout.Error(),
				warn: "attempt not abandoned: recovered at its CompleteBy"}},
		{"a call that may not be made now (its key's line, its turn) is given back for its wait", plain(), called{}, line,
			verdict{kind: giveBack, wait: 5 * time.Second, why: line.Why}},
		{"what comes before the call failing gives the attempt back, not called", plain(), called{}, storeDown,
			verdict{kind: giveBackUncalled, err: storeDown}},
		{"the payload budget held by others gives the attempt back, not called", plain(), called{}, kept.ErrBudgetBusy,
			verdict{kind: giveBackUncalled, err: kept.ErrBudgetBusy}},

		// After its call: what came of it.
		{"an input gone as it was sent is refused, as having run if a try before met a fault", plain(), retried, gone,
			verdict{kind: recordRefusal, refusal: "charge-payment's input: " + gone.Err.Error(), ran: true}},
		{"an input the function may not read is refused", plain(), made, denied,
			verdict{kind: recordRefusal, refusal: "charge-payment's input: " + denied.Err.Error()}},
		{"an input that failed as it was sent, for a moment, gives the attempt back, not called", plain(), retried, s3Blip,
			verdict{kind: giveBackUncalled, err: s3Blip, ran: true}},
		{"an async call its service took is noted, for its callback to record", async(), made, nil,
			verdict{kind: acceptAsync}},
		{"an answer is kept as its step's result", plain(), called{made: true, result: []byte(`{"ok":1}`), at: now}, nil,
			verdict{kind: keepResult, result: []byte(`{"ok":1}`)}},
		{"a slow-down with flow control holds every instance, and gives the attempt back for then", gated(), retried, slow,
			verdict{kind: slowDown, wait: 30 * time.Second, jitter: true, why: slow.Error(), err: slow, ran: true}},
		{"a slow-down without flow control is the function's failure: SQS delivers it again", plain(), made, slow,
			verdict{kind: redeliver, err: slow}},
		{"a breaker that opened meanwhile gives the attempt back until it may let a call through", plain(), made, open,
			verdict{kind: giveBack, wait: 7 * time.Second, jitter: true, why: open.Error()}},
		{"a breaker's wait is never less than none", plain(), made, shut,
			verdict{kind: giveBack, jitter: true, why: shut.Error()}},
		{"a permanent refusal is recorded within its bound, and logged", plain(), retried, refused,
			verdict{kind: recordRefusal, refusal: message.Clip(refused.Error(), MaxRefusalBytes), warn: "non-transient remote fault; recorded as a refusal"}},
		{"an async call its service never took ends the attempt now, not after the async wait", async(), retried, answeredLast,
			verdict{kind: abandonNow, why: answeredLast.Error(), reason: "its service did not accept the call: " + answeredLast.Error(),
				warn: "async attempt not abandoned: recovered at its CompleteBy"}},
		{"an async attempt past its own time is left to the Supervisor", async(), late, outOfTime,
			verdict{kind: leaveToSupervisor, why: outOfTime.Error()}},
		{"an attempt out of time, its service having answered, ends now with what it said", plain(), retried, answeredLast,
			verdict{kind: abandonNow, why: answeredLast.Error(), reason: answeredLast.Error(),
				warn: "attempt not ended early: recovered at its CompleteBy"}},
		{"an attempt out of time with no answer is left to the Supervisor: no write, no reply", plain(), retried, outOfTime,
			verdict{kind: leaveToSupervisor, why: outOfTime.Error()}},
		{"the function out of its own time leaves the request to SQS", plain(), made, context.DeadlineExceeded,
			verdict{kind: redeliver, err: context.DeadlineExceeded}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, judge(c.a, c.c, c.err))
		})
	}
}
