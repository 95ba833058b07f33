package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/smithy-go"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// called is what came of an attempt's call, as judge reads it: made
// (false: no call was made, what comes before it failed), its service's
// answer (result), retried (a try before the last met a transient fault,
// and may have taken effect) and at, when it came.
type called struct {
	made    bool
	result  []byte
	retried bool
	at      time.Time
}

// verdictKind names what becomes of an attempt.
type verdictKind int

const (
	// keepResult: its service's answer is its step's result: kept
	// (resultOf, which refuses one that cannot be), recorded and replied.
	keepResult verdictKind = iota + 1
	// recordRefusal: the step is refused for good: recorded and replied.
	recordRefusal
	// giveBack: given back, no failure counted, ready again after its
	// wait, and its request sent again for then (release).
	giveBack
	// giveBackUncalled: no call was made, what comes before it failed:
	// given back after a back-off (notCalled).
	giveBackUncalled
	// slowDown: its service asked for no calls for a while: every instance
	// holds its calls, and the attempt is given back for then.
	slowDown
	// acceptAsync: its service took an async call: noted (accept), and its
	// callback records the outcome.
	acceptAsync
	// abandonNow: out of time, the attempt is ended now (abandon), for the
	// Supervisor to recover at its next sweep; no reply.
	abandonNow
	// leaveToSupervisor: out of time: nothing written and no reply, the
	// Supervisor recovers the step at its CompleteBy.
	leaveToSupervisor
	// redeliver: the function's own failure: SQS delivers the request
	// again.
	redeliver
)

// verdict is what becomes of an attempt: a named value judge decides and
// record carries out, as river's job executor passes its state changes,
// as values, to one writer.
type verdict struct {
	kind verdictKind
	// result is a keepResult's: its service's answer.
	result []byte
	// refusal is a recordRefusal's reason.
	refusal string
	// ran: a request of the attempt may have taken effect (a
	// recordRefusal's, a give-back's, a slowDown's).
	ran bool
	// wait is how long a give-back (giveBack, slowDown) waits before it is
	// ready again; jitter adds up to a second, at random, so that calls
	// given back together come back apart.
	wait   time.Duration
	jitter bool
	// why is why a give-back waits, or why an attempt out of time ran out
	// (abandonNow, leaveToSupervisor: the log's).
	why string
	// reason is what abandonNow ends the attempt with.
	reason string
	// warn is logged as a recordRefusal is recorded, or if abandonNow
	// could not end the attempt.
	warn string
	// err is a giveBackUncalled's cause, a slowDown's *SlowDownError, or
	// the error a redeliver leaves to SQS.
	err error
}

// judge is what becomes of attempt a after what came of its call (c,
// err), or, no call made (c.made false), after what came before it
// instead (err: prepare's). It is pure: it reads a, c and err, and
// nothing else (TestJudge names its every case).
func judge(a *attempt, c called, err error) verdict {
	if !c.made {
		return judgeUncalled(a, err)
	}
	var slow *SlowDownError
	var open *BreakerOpenError
	var unread *InputError
	switch {
	case errors.As(err, &unread) && unreadable(unread.Err):
		// A payload of its input gone or altered as it was sent: the step
		// fails for good with the reason, as one found so before its call.
		return verdict{kind: recordRefusal, refusal: fmt.Sprintf("%s's input: %v", a.st.Name, unread.Err), ran: c.retried}
	case errors.As(err, &unread):
		// Read as it was sent, its input failed (S3, for a moment): given
		// back, tried again, as one whose input was not read before it.
		return verdict{kind: giveBackUncalled, err: unread, ran: c.retried}
	case err == nil && a.action.Async:
		return verdict{kind: acceptAsync}
	case err == nil:
		return verdict{kind: keepResult, result: c.result}
	case errors.As(err, &slow) && a.gated:
		// A 429 or 503 with Retry-After did nothing; a try before it that
		// met a transient fault may have.
		return verdict{kind: slowDown, wait: slow.After, jitter: true, why: slow.Error(), err: slow, ran: c.retried}
	case errors.As(err, &open):
		// Nothing was called: given back, its key's slot let go, and sent
		// again for when the breaker may let a call through.
		return verdict{kind: giveBack, wait: max(open.Wait, 0), jitter: true, why: open.Error()}
	case IsPermanent(err):
		return verdict{kind: recordRefusal, refusal: message.Clip(err.Error(), MaxRefusalBytes), // an Agent in Go quotes what it likes
			warn: "non-transient remote fault; recorded as a refusal"}
	case errors.Is(err, errDeadline):
		return judgeLate(a, c, err)
	}
	return verdict{kind: redeliver, err: err} // the function itself is out of time: SQS retries the request
}

// judgeUncalled is what becomes of attempt a whose call was not made: err
// is what came before it instead.
func judgeUncalled(a *attempt, err error) verdict {
	var wait *waitError
	switch {
	case IsPermanent(err): // the step cannot be given what it needs: refused, it ran nothing
		return verdict{kind: recordRefusal, refusal: refusalOf(a.sealed, err)}
	case errors.Is(err, workflow.ErrExpressionTimeout):
		// As a call out of time: nothing is recorded, and the attempt is
		// ended now for the Supervisor to recover at its next sweep (a
		// failure counted, the step tried again after its backoff).
		return verdict{kind: abandonNow, why: err.Error(), reason: err.Error(), warn: "attempt not abandoned: recovered at its CompleteBy"}
	case errors.As(err, &wait):
		// It may not call now: given back, no failure counted and nothing
		// undone, ready again when its wait ends.
		return verdict{kind: giveBack, wait: wait.Wait, why: wait.Why}
	}
	return verdict{kind: giveBackUncalled, err: err}
}

// judgeLate is what becomes of attempt a whose call ran out of its time
// (err, errDeadline) at c.at.
func judgeLate(a *attempt, c called, err error) verdict {
	if a.action.Async && a.deadline.After(c.at) {
		// Its service never took the call, and this run's time is out: no
		// callback will come. Left as it is, the attempt would hold the step
		// for the whole async wait; ended now, the Supervisor recovers it
		// at its next sweep.
		return verdict{kind: abandonNow, why: err.Error(), reason: "its service did not accept the call: " + err.Error(),
			warn: "async attempt not abandoned: recovered at its CompleteBy"}
	}
	if strings.Contains(err.Error(), lastAnswered) {
		// Its service answered, transiently, and the attempt is out of
		// time: the attempt ends now with what the service said (one
		// write, only for an attempt that fails so), for the give-up's
		// alert and status to name it.
		return verdict{kind: abandonNow, why: err.Error(), reason: err.Error(), warn: "attempt not ended early: recovered at its CompleteBy"}
	}
	return verdict{kind: leaveToSupervisor, why: err.Error()} // no outcome and no reply: the Supervisor recovers the step
}

// waitError is an attempt that may not call now (its key's slots all held,
// a pause or a slow-down, its rate turn too late for its call): given back,
// no failure counted and nothing undone, ready again when its wait ends.
type waitError struct{ flow.Verdict }

func (e *waitError) Error() string {
	return fmt.Sprintf("waits %s: %s", e.Wait.Round(time.Millisecond), e.Why)
}

// refusalOf is what an attempt refused before its call is recorded and
// logged with: err's text; of a sealed order, quoting no jq expression's
// message (workflow.QuotingNoData).
func refusalOf(sealed bool, err error) string {
	if sealed {
		return workflow.QuotingNoData(err)
	}
	return err.Error()
}

// unreadable reports whether err says a step's input cannot be read, now or
// after any try again: a payload gone or altered, or not this order's; a
// document over its agent's budget; sealed data that does not open; or a
// permission or a key the function does not have (the bucket's, KMS's).
// The step fails for good with the reason, which alerts its operator; any
// other error of reading it gives the attempt back to be tried again
// (notCalled).
func unreadable(err error) bool {
	if kept.NoKey(err) {
		// A function with no key at all is one whose configuration lags
		// its deployment's (kms added a moment ago): given back, the
		// attempt is tried again on one that has it.
		return false
	}
	if kept.Broken(err) {
		return true
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "AccessDenied", "AllAccessDisabled", // S3: the role may not read the bucket
		"AccessDeniedException", "DisabledException", "KMSInvalidStateException", "NotFoundException",
		"InvalidKeyUsageException", "IncorrectKeyException": // KMS: the key or its use is not the function's
		return true
	}
	return false
}
