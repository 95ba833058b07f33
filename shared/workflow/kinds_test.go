package workflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

func TestTheApprovalExampleWaitsThenUsesTheApproval(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample("approval")
	require.Equal(t, []workflow.Kind{workflow.KindAgent, workflow.KindEvent, workflow.KindAgent},
		[]workflow.Kind{d.Steps[0].Kind(), d.Steps[1].Kind(), d.Steps[2].Kind()})
	require.Equal(t, &workflow.Wait{Event: "approved", Timeout: 72 * time.Hour}, d.Steps[1].Wait)
	require.Equal(t, []string{"inventory", "payment"}, d.Agents(), "a wait calls no agent")
	i, ok := d.WaitFor("approved")
	require.True(t, ok)
	require.Equal(t, 1, i)

	doc := workflow.Document{Order: json.RawMessage(`{"orderId":"o-1","customerId":"c-1"}`),
		Results: map[string]json.RawMessage{"await-approval": json.RawMessage(`{"amountCents":1998,"by":"ana"}`)}}
	in, err := d.Steps[2].InputFor(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","customerId":"c-1","amountCents":1998,"approvedBy":"ana"}`, string(in))

	doc.Result = json.RawMessage(`{"chargeId":"ch-9"}`)
	in, err = d.Steps[2].Undo.InputFor(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","charge":{"chargeId":"ch-9"}}`, string(in), "an undo is given its step's result, and the order's id")
	doc.Result = nil // the charge timed out: its answer never came
	in, err = d.Steps[2].Undo.InputFor(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","charge":null}`, string(in), "the refund still finds the charge by the order")
}

// With no input expression a step receives its whole document.
func TestTheDefaultInputIsTheDocument(t *testing.T) {
	t.Parallel()
	a := workflow.MustExample("order").Steps[1].Action
	in, err := a.InputFor(workflow.Document{Order: json.RawMessage(`{"orderId":"o-1"}`),
		Results: map[string]json.RawMessage{"reserve-inventory": json.RawMessage(`{"held":2}`)}})
	require.NoError(t, err)
	require.JSONEq(t, `{"order":{"orderId":"o-1"},"results":{"reserve-inventory":{"held":2}}}`, string(in))
	in, err = a.InputFor(workflow.Document{Order: json.RawMessage(`{"orderId":"o-1"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"order":{"orderId":"o-1"},"results":{}}`, string(in), "no results: an empty map, never null")
}

// An input expression that never ends is stopped, with the reason, rather
// than holding its handler's batch.
func TestAnInputExpressionThatLoopsIsStopped(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("loop.yaml", []byte(`name: loop
agents: {shop: {endpoint: 'http://shop'}}
steps:
  - {name: s, agent: shop, timeout: 1s, input: 'def f: f; f'}
`), workflow.Options{})
	require.NoError(t, err)
	_, err = d.Steps[0].InputFor(workflow.Document{Order: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, workflow.ErrExpressionTimeout, "stopped at MaxJQTime: tried again (a starved CPU is no fault of the step)")
}

// Hostile input expressions: each fails its own step with its reason (an
// ExpressionError: refused), within its bounds, and none takes the memory
// that would kill its handler's batch.
func TestHostileInputExpressionsAreRefusedWithinTheirBounds(t *testing.T) {
	// A run that builds slowly may run out of time first on a slow CPU (the
	// race detector's): bounded all the same, it is then tried again.
	const outOfTime, retried = "or out of time", "tried again"
	for name, c := range map[string]struct{ expr, reason string }{
		"a string repeated 300 million times": {`"x" * 300000000`, "would make a value of 300000000 bytes, over the 1048576-byte bound"},
		"repeated by the order's number":      {`.order.s * .order.n`, "would make a value of"},
		"a string doubled 40 times":           {`reduce range(40) as $i ("x"; . + .)`, "over the 1048576-byte bound"},
		"an array doubled 40 times":           {`reduce range(40) as $i ([1]; . + .)`, "over the 1048576-byte bound"},
		"a billion numbers":                   {`[range(1e9)]`, retried},
		"a string repeated without end":       {`[limit(1e9; repeat("xxxxxxxxxxxxxxxx"))] | length`, retried},
		"a value over the bound":              {`("x" * 1000000) as $s | [range(17)] | map($s)`, "it gave more than 16777216 bytes once encoded, the most a payload may be"},
		"a string named a thousand times":     {`("x" * 1000000) as $s | [range(1000)] | map($s)`, "it gave more than 16777216 bytes once encoded"},
		"an error of its own":                 {`error("no such thing")`, "no such thing"},
		"a field of a string":                 {`.order.s.x`, "expected an object but got: string"},
		"no value":                            {`empty`, "the expression gave no value"},
		"two values":                          {`1, 2`, "the expression gave more than one value"},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := workflow.ParseFile("hostile.yaml", []byte(`name: hostile
agents: {shop: {endpoint: 'http://shop'}}
steps:
  - {name: s, agent: shop, timeout: 1s, input: '`+strings.ReplaceAll(c.expr, "'", "''")+`'}
`), workflow.Options{})
			require.NoError(t, err)
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = d.Steps[0].InputFor(workflow.Document{Order: json.RawMessage(`{"s":"xxxxxxxxxx","n":100000000}`)})
			require.Contains(t, err.Error(), "s's input: ")
			reason, either := strings.CutSuffix(c.reason, outOfTime)
			switch {
			case reason == retried:
				// Stopped by what its process allocated, or by its time:
				// tried again (the allocations may be another attempt's).
				require.ErrorIs(t, err, workflow.ErrExpressionTimeout)
				require.Regexp(t, `allocated over [0-9]+ MB: tried again|ran out of time`, err.Error())
			case !either || !errors.Is(err, workflow.ErrExpressionTimeout):
				var ee *workflow.ExpressionError
				require.ErrorAs(t, err, &ee, "refused, not tried again: %v", err)
				require.Contains(t, err.Error(), reason)
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			require.Less(t, after.HeapInuse, before.HeapInuse+workflow.JQAllocBound+3*workflow.MaxJQAllocBytes, "the run's memory stayed bounded")
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(workflow.JQAllocBound+3*workflow.MaxJQAllocBytes),
				"and so did what it allocated (a value encoded is allocated too)")
		})
	}
	// What is bounded still works under its bound.
	d, err := workflow.ParseFile("fine.yaml", []byte(`name: fine
agents: {shop: {endpoint: 'http://shop'}}
steps:
  - {name: s, agent: shop, timeout: 1s, input: '{a: ("ab" * 3), b: ([1] + [2]), c: (2 * 3), d: ({x: 1} * {y: 2}), e: (.order.s + "!"), f: (null + 1)}'}
`), workflow.Options{})
	require.NoError(t, err)
	in, err := d.Steps[0].InputFor(workflow.Document{Order: json.RawMessage(`{"s":"x"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"ababab","b":[1,2],"c":6,"d":{"x":1,"y":2},"e":"x!","f":1}`, string(in))
}

const parked = `name: parked
deadline: 48h
resultLimit: 16KB
agents:
  shop: {endpoint: http://shop.internal}
steps:
  - name: hold
    agent: shop
    async: true
    timeout: 6h
  - name: cool-off
    sleep: 2h
  - name: remind-at
    until: .order.remindAt
  - name: approve
    wait: {event: approved, timeout: 24h, onTimeout: continue}
`

func TestParkedStepsAndAsyncStepsParse(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("parked.yaml", []byte(parked), workflow.Options{MaxStepTimeout: 25 * time.Second})
	require.NoError(t, err, "an async step's timeout bounds its callback, not its agent function")
	require.True(t, d.Steps[0].Async)
	require.Equal(t, 16<<10, d.Limit())
	require.Equal(t, workflow.KindTimer, d.Steps[1].Kind())
	require.Equal(t, 2*time.Hour, d.Steps[1].Sleep.For)
	require.True(t, d.Steps[3].Wait.Continue)

	ready := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at, err := d.Steps[1].Sleep.When(ready, workflow.Document{})
	require.NoError(t, err)
	require.Equal(t, ready.Add(2*time.Hour), at)
	for order, want := range map[string]time.Time{
		`{"remindAt":"2026-11-26T09:30:00Z"}`: time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC),
		`{"remindAt":1795000000}`:             time.Unix(1795000000, 0),
	} {
		at, err = d.Steps[2].Sleep.When(ready, workflow.Document{Order: json.RawMessage(order)})
		require.NoError(t, err, order)
		require.True(t, want.Equal(at), "%s: %s", order, at)
	}
	_, err = d.Steps[2].Sleep.When(ready, workflow.Document{Order: json.RawMessage(`{"remindAt":"next tuesday"}`)})
	require.ErrorContains(t, err, "not an RFC 3339 time")
	_, err = d.Steps[2].Sleep.When(ready, workflow.Document{Order: json.RawMessage(`{"remindAt":"2026-11-26T09:30:00"}`)})
	var ee *workflow.ExpressionError
	require.ErrorAs(t, err, &ee, "no retry mends it: the step fails")
	require.EqualError(t, err, `until: "2026-11-26T09:30:00" has no UTC offset (end it with Z or one like +01:00)`)
	for _, big := range []string{`"` + strings.Repeat("x", 1<<20) + `"`, `{"pad":"` + strings.Repeat("x", 1<<20) + `"}`} {
		_, err = d.Steps[2].Sleep.When(ready, workflow.Document{Order: json.RawMessage(`{"remindAt":` + big + `}`)})
		require.ErrorAs(t, err, &ee)
		require.Less(t, len(err.Error()), 300, "a reason quotes 100 characters of what until gave, not a megabyte")
	}
	over := d.With(workflow.Settings{StepTimeout: 5 * time.Second})
	require.True(t, d.Steps[0].Async)
	require.Equal(t, d.Steps[0].Timeout, over.Steps[0].Timeout, "an async step keeps its timeout: it bounds a callback, not a call")
	sync := workflow.Orders(workflow.Settings{}).With(workflow.Settings{StepTimeout: 5 * time.Second})
	require.Equal(t, 5*time.Second, sync.Steps[0].Timeout, "an override reaches a step answered at once")
	require.Equal(t, d.Steps[3].Wait, over.Steps[3].Wait, "and leaves waits and timers as written")
	require.Equal(t, d.Steps[1].Sleep.For, over.Steps[1].Sleep.For)
}

// An order deadline that overrides the files' bounds their holds too: a
// hold is no longer than the deadline whose results it must keep.
func TestAnOrderDeadlineOverrideBoundsAHold(t *testing.T) {
	d := workflow.MustExample(workflow.OrderWorkflow)
	d.Steps[1].HoldFor = d.Deadline // onFailure: hold, holdFor its default
	short := d.With(workflow.Settings{OrderDeadline: 2 * time.Hour})
	require.Equal(t, 2*time.Hour, short.Steps[1].HoldFor)
	require.Equal(t, 4*time.Hour+2*time.Hour, short.Lifetime(), "its round, its hold, its compensation")
	require.Zero(t, short.Steps[0].HoldFor, "a step that holds nothing still does not")
	long := d.With(workflow.Settings{OrderDeadline: 100 * time.Hour})
	require.Equal(t, d.Deadline, long.Steps[1].HoldFor, "a longer deadline leaves the hold as written")
}

const badParked = `name: bad
deadline: 24h
resultLimit: 1GB
agents:
  shop: {endpoint: http://shop.internal}
steps:
  - name: charge
    agent: shop
    input: '{amount: .order.total'
  - name: approve
    agent: shop
    wait: {event: approved, timeout: 72h, onTimeout: retry}
  - name: approve-again
    wait: {event: approved}
  - name: later
    until: .order.(
`

// Every problem of the new fields is reported at once, with its line and
// field: a jq expression that does not compile, a wait with an agent, a
// timeout past the deadline, an event waited for twice.
func TestParkedStepsProblemsNameTheLineAndField(t *testing.T) {
	t.Parallel()
	_, err := workflow.ParseFile("bad.yaml", []byte(badParked), workflow.Options{})
	ps := problems(err)
	require.Contains(t, ps, `bad.yaml:3: resultLimit: "1GB" is not a size like 4096, 4KB or 16MB`)
	require.Contains(t, joined(ps), "bad.yaml:9: steps[0].input: jq: ")
	require.Contains(t, ps, `bad.yaml:11: steps[1].agent: step "approve" waits or sleeps: it calls no agent, so it has no agent`)
	require.Contains(t, ps, `bad.yaml:12: steps[1].wait.timeout: 72h0m0s is longer than the order's deadline (24h0m0s), which would fail the order first: raise deadline`)
	require.Contains(t, ps, `bad.yaml:12: steps[1].wait.onTimeout: "retry": say fail (the default: the step fails for good) or continue`)
	require.Contains(t, ps, `bad.yaml:14: steps[2].wait.event: event "approved" is waited for by another step: each event is waited for once`)
	require.Contains(t, joined(ps), "bad.yaml:16: steps[3].until: jq: ")

	_, err = workflow.ParseFile("long.yaml", []byte("name: long\ndeadline: 1h\nagents: {a: {endpoint: 'http://a'}}\n"+
		"steps:\n  - {name: s, agent: a, timeout: 1s}\n  - {name: nap, sleep: 2h}\n"), workflow.Options{})
	require.Contains(t, problems(err), "long.yaml:6: steps[1].sleep: 2h0m0s is not shorter than the order's deadline (1h0m0s), "+
		"which would fail the order first: raise deadline")
}

func joined(ps []string) string {
	out := ""
	for _, p := range ps {
		out += p + "\n"
	}
	return out
}

// A parked record found due: a timer is woken; a wait that goes on at its
// timeout (or whose event was kept) is woken; any other wait fails for good
// at its timeout; the order's deadline fails any.
func TestDecideWakesTimersAndTimesOutWaits(t *testing.T) {
	t.Parallel()
	p := time.Minute
	d := func(f workflow.Found) workflow.Decision { return workflow.Decide(f, p) }
	require.Equal(t, workflow.Decision{Verdict: workflow.Wake, After: p}, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindTimer}))
	require.Equal(t, workflow.Wake, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindEvent, Continue: true}).Verdict)
	require.Equal(t, workflow.Wake, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindEvent, EventKept: true}).Verdict)
	require.Equal(t, workflow.Decision{Verdict: workflow.GiveUp}, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindEvent}))
	require.Equal(t, workflow.GiveUp, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindTimer, PastDeadline: true}).Verdict)
	require.Equal(t, workflow.Resend, d(workflow.Found{State: workflow.Pending}).Verdict, "not armed yet: its start may be lost")

	// Woken before and found again: its wake is lost, or waits behind a
	// backlog. Held while the scheduler queue is backlogged; woken again
	// otherwise, looked at again at growing intervals either way.
	again := workflow.Found{State: workflow.Pending, Parked: workflow.KindTimer, SinceWoken: 5 * time.Minute}
	require.Equal(t, workflow.Decision{Verdict: workflow.Wake, After: 5 * time.Minute}, d(again))
	again.Backlogged = true
	require.Equal(t, workflow.Decision{Verdict: workflow.Hold, After: 5 * time.Minute}, d(again))
	again.SinceWoken = 2 * time.Hour
	require.Equal(t, workflow.MaxRecoveryDelay, d(again).After)
}

// A wait may name the senders whose event it takes, by SQS SenderId; a
// role's id names all its sessions.
func TestAWaitTakesTheEventOfTheSendersItNames(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("senders.yaml", []byte(`name: senders
steps:
  - name: await-approval
    wait: {event: approved, senders: [AIDAEXAMPLEUSER, AROAEXAMPLEROLE, "AROAOTHERROLE:ops-bot"]}
`), workflow.Options{})
	require.NoError(t, err)
	w := d.Steps[0].Wait
	for sender, want := range map[string]bool{
		"AIDAEXAMPLEUSER": true, "AROAEXAMPLEROLE:any-session": true, "AROAOTHERROLE:ops-bot": true,
		"AROAOTHERROLE:someone": false, "AIDAEXAMPLEUSER2": false, "AROAEXAMPLEROLEX:s": false, "": false,
	} {
		require.Equal(t, want, w.Accepts(sender), sender)
	}
	require.True(t, workflow.Wait{Event: "approved"}.Accepts("anyone"), "naming none takes anyone's")
	_, err = workflow.ParseFile("bad.yaml", []byte(`name: bad
steps:
  - name: await-approval
    wait: {event: approved, senders: ["arn:aws:iam::role/x y"]}
`), workflow.Options{})
	require.ErrorContains(t, err, "steps[0].wait.senders[0]")
	require.ErrorContains(t, err, "is not an SQS SenderId")
}

// An input that measures a 16 MB string of its order (the chaos run's
// order at the limits) runs to its end in a race build as in a production
// one: there gojq's string length allocates four bytes a character (64 MB,
// and three times that for three lengths), which a production build does
// not allocate at all (jqAllocBound). With the production bound, a race
// build stopped it at every attempt, and the order failed. (A starved CPU
// may run it out of time instead: that judges nothing.)
func TestAnInputThatMeasuresA16MBStringRunsInARaceBuildToo(t *testing.T) {
	d, err := workflow.ParseFile("index.yaml", []byte(`name: index
agents: {archive: {endpoint: 'http://archive'}}
steps:
  - name: index-documents
    agent: archive
    timeout: 20s
    input: '{orderId: .order.orderId, documents: (.order.documents | length), again: (.order.documents | length), thrice: (.order.documents | length), pages: (.results.scan.lines | length)}'
`), workflow.Options{})
	require.NoError(t, err)
	const n = 16<<20 - 64 // an order of 16 MB (payload.MaxBytes), all but its other members
	order := `{"orderId":"o-1","documents":"` + strings.Repeat("d", n) + `"}`
	scan := `{"lines":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"SKU-01234","quantity":3},`, 1000), ",") + `]}`
	in, err := d.Steps[0].InputFor(workflow.Document{Order: json.RawMessage(order), Results: map[string]json.RawMessage{"scan": json.RawMessage(scan)}})
	if err != nil && strings.Contains(err.Error(), "ran out of time") {
		t.Skipf("out of time on a starved CPU, not stopped for what it allocated: nothing to judge (%v)", err)
	}
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"orderId":"o-1","documents":%d,"again":%d,"thrice":%d,"pages":1000}`, n, n, n), string(in))
}

// What the process allocates while an expression runs is not all the
// run's: an Agent's other attempts of its batch go on meanwhile (one
// reading a 16 MB payload back), and Go counts allocations by process. A
// modest expression stopped so is tried again, never refused: a refusal
// fails its step for good, and undoes its order, for another's work.
func TestAnExpressionIsNotRefusedForWhatItsProcessAllocatedMeanwhile(t *testing.T) {
	d, err := workflow.ParseFile("slow.yaml", []byte(`name: slow
agents: {shop: {endpoint: 'http://shop'}}
steps:
  - {name: s, agent: shop, timeout: 1s, input: 'reduce range(3000000) as $i (0; . + 1)'}
`), workflow.Options{})
	require.NoError(t, err)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // another attempt, reading payloads back as fast as it can
		defer close(done)
		var keep []byte
		for {
			select {
			case <-stop:
				_ = keep
				return
			default:
				keep = make([]byte, 8<<20)
			}
		}
	}()
	_, err = d.Steps[0].InputFor(workflow.Document{Order: json.RawMessage(`{}`)})
	close(stop)
	<-done
	if err == nil {
		t.Skip("the expression ran to its end before the other work allocated its bound (a fast machine): nothing to judge")
	}
	var ee *workflow.ExpressionError
	require.False(t, errors.As(err, &ee), "not refused: %v", err)
	require.ErrorIs(t, err, workflow.ErrExpressionTimeout, "tried again")
}
