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
	for _, c := range judgeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, judge(c.a, c.c, c.err))
		})
	}
}

// A judged attempt, as its pipeline carries it, and what came of its call.
var (
	judgedAt   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	judgedStep = &statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Name: "charge-payment"}},
		OrderOf: statestore.OrderOf{OrderID: "o-1"}, AtWork: statestore.AtWork{CompleteBy: judgedAt.Add(time.Minute)}}
	plainAttempt = func() *attempt {
		return &attempt{st: judgedStep, deadline: judgedStep.CompleteBy.Add(-100 * time.Millisecond)}
	}
	asyncAttempt  = func() *attempt { a := plainAttempt(); a.action.Async = true; return a }
	sealedAttempt = func() *attempt { a := plainAttempt(); a.sealed = true; return a }
	gatedAttempt  = func() *attempt { a := plainAttempt(); a.gated = true; return a }
	calledOnce    = called{made: true, at: judgedAt}
	calledAgain   = called{made: true, retried: true, at: judgedAt}
	calledLate    = called{made: true, retried: true, at: judgedStep.CompleteBy}
)

// What came before a call, or of it.
var (
	exprFailed  = &workflow.ExpressionError{What: ".card", Reason: "card 4111 is no object"}
	exprRefusal = &PermanentError{Body: "charge-payment's input: " + exprFailed.Error(), Cause: exprFailed}
	storeDown   = errors.New("the state store failed")
	inLine      = &waitError{flow.Verdict{Wait: 5 * time.Second, Why: `waiting for a slot of key "k1" (2nd in line)`}}
	exprLate    = fmt.Errorf("input: %w", workflow.ErrExpressionTimeout)
	inputGone   = &InputError{Err: &kept.DocumentError{Bytes: 40 << 20, Max: 32 << 20}}
	inputDenied = &InputError{Err: &smithy.GenericAPIError{Code: "AccessDenied"}}
	inputBlip   = &InputError{Err: &smithy.GenericAPIError{Code: "SlowDown"}}
	slowedDown  = &SlowDownError{Status: 429, After: 30 * time.Second, Text: "429: slow down"}
	breakerOpen = &BreakerOpenError{Agent: "payment", Wait: 7 * time.Second}
	breakerShut = &BreakerOpenError{Agent: "payment", Wait: -time.Second}
	refusedLong = &PermanentError{Status: 422, Body: strings.Repeat("no ", MaxRefusalBytes)}
	outOfTime   = pastDeadline(errDeadline, nil)
	lastSaid    = pastDeadline(errDeadline, errors.New("remote 503"))
)

// judgeCases are TestJudge's rows: an attempt, what came of its call (or
// no call), and its verdict.
var judgeCases = []struct {
	name string
	a    *attempt
	c    called
	err  error
	want verdict
}{
	// Before its call: what prepare met instead.
	{"an input that cannot be given is refused, having run nothing", plainAttempt(), called{}, exprRefusal,
		verdict{kind: recordRefusal, refusal: exprRefusal.Error()}},
	{"a sealed order's refusal before its call quotes no jq expression's message", sealedAttempt(), called{}, exprRefusal,
		verdict{kind: recordRefusal, refusal: workflow.QuotingNoData(exprRefusal)}},
	{"an expression out of time ends the attempt now, for the Supervisor's next sweep", plainAttempt(), called{}, exprLate,
		verdict{kind: abandonNow, why: exprLate.Error(), reason: exprLate.Error(), warn: "attempt not abandoned: recovered at its CompleteBy"}},
	{"a call that may not be made now (its key's line, its turn) is given back for its wait", plainAttempt(), called{}, inLine,
		verdict{kind: giveBack, wait: 5 * time.Second, why: inLine.Why}},
	{"what comes before the call failing gives the attempt back, not called", plainAttempt(), called{}, storeDown,
		verdict{kind: giveBackUncalled, err: storeDown}},
	{"the payload budget held by others gives the attempt back, not called", plainAttempt(), called{}, kept.ErrBudgetBusy,
		verdict{kind: giveBackUncalled, err: kept.ErrBudgetBusy}},

	// After its call: what came of it.
	{"an input gone as it was sent is refused, as having run if a try before met a fault", plainAttempt(), calledAgain, inputGone,
		verdict{kind: recordRefusal, refusal: "charge-payment's input: " + inputGone.Err.Error(), ran: true}},
	{"an input the function may not read is refused", plainAttempt(), calledOnce, inputDenied,
		verdict{kind: recordRefusal, refusal: "charge-payment's input: " + inputDenied.Err.Error()}},
	{"an input that failed as it was sent, for a moment, gives the attempt back, not called", plainAttempt(), calledAgain, inputBlip,
		verdict{kind: giveBackUncalled, err: inputBlip, ran: true}},
	{"an async call its service took is noted, for its callback to record", asyncAttempt(), calledOnce, nil,
		verdict{kind: acceptAsync}},
	{"an answer is kept as its step's result", plainAttempt(), called{made: true, result: []byte(`{"ok":1}`), at: judgedAt}, nil,
		verdict{kind: keepResult, result: []byte(`{"ok":1}`)}},
	{"a slow-down with flow control holds every instance, and gives the attempt back for then", gatedAttempt(), calledAgain, slowedDown,
		verdict{kind: slowDown, wait: 30 * time.Second, jitter: true, why: slowedDown.Error(), err: slowedDown, ran: true}},
	{"a slow-down without flow control is the function's failure: SQS delivers it again", plainAttempt(), calledOnce, slowedDown,
		verdict{kind: redeliver, err: slowedDown}},
	{"a breaker that opened meanwhile gives the attempt back until it may let a call through", plainAttempt(), calledOnce, breakerOpen,
		verdict{kind: giveBack, wait: 7 * time.Second, jitter: true, why: breakerOpen.Error()}},
	{"a breaker's wait is never less than none", plainAttempt(), calledOnce, breakerShut,
		verdict{kind: giveBack, jitter: true, why: breakerShut.Error()}},
	{"a permanent refusal is recorded within its bound, and logged", plainAttempt(), calledAgain, refusedLong,
		verdict{kind: recordRefusal, refusal: message.Clip(refusedLong.Error(), MaxRefusalBytes), warn: "non-transient remote fault; recorded as a refusal"}},
	{"an async call its service never took ends the attempt now, not after the async wait", asyncAttempt(), calledAgain, lastSaid,
		verdict{kind: abandonNow, why: lastSaid.Error(), reason: "its service did not accept the call: " + lastSaid.Error(),
			warn: "async attempt not abandoned: recovered at its CompleteBy"}},
	{"an async attempt past its own time is left to the Supervisor", asyncAttempt(), calledLate, outOfTime,
		verdict{kind: leaveToSupervisor, why: outOfTime.Error()}},
	{"an attempt out of time, its service having answered, ends now with what it said", plainAttempt(), calledAgain, lastSaid,
		verdict{kind: abandonNow, why: lastSaid.Error(), reason: lastSaid.Error(), warn: "attempt not ended early: recovered at its CompleteBy"}},
	{"an attempt out of time with no answer is left to the Supervisor: no write, no reply", plainAttempt(), calledAgain, outOfTime,
		verdict{kind: leaveToSupervisor, why: outOfTime.Error()}},
	{"the function out of its own time leaves the request to SQS", plainAttempt(), calledOnce, context.DeadlineExceeded,
		verdict{kind: redeliver, err: context.DeadlineExceeded}},
}
