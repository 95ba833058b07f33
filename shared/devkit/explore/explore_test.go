package explore_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/explore"
	"github.com/sas-go/sas/shared/devkit/shapes"
)

var engines = map[string]emulatortest.Engine{}

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithEngines(m, engines)) }

var (
	seed     = flag.Uint64("explore.seed", 0, "the first run's seed (0: from the clock)")
	duration = flag.Duration("explore.for", 40*time.Second, "how long each engine explores, its regression seeds included (the long mode: -explore.for 30m)")
	runs     = flag.Int("explore.runs", 0, "stop after this many runs per engine (1 with -explore.seed replays one)")
	large    = flag.Bool("explore.large", false, "every run large: a forEach step of 30 to 100 items at the documented limits")
)

// regressions are seeds that found defects, replayed first on every engine
// (unless -explore.seed names one): each still reaches what it found.
var regressions = []struct {
	seed     uint64
	large    bool
	found    string
	payloads bool // found in a run that kept its payloads in its bucket (the others replay plain)
	store    bool // found in a run with state store faults (the others replay without)
	// Every one was found before senders sent bodies by pointer and
	// before runs were hostile: each replays without (NoPointers,
	// NoHostile), and without moves (NoMigrate), but those found in a run
	// that moved orders: they replay with every feature the run had. None
	// searched or acted by a query (NoSearch).
	moves bool
}{
	{99137274, false, "a give-back by the flow control while the order was undone stranded it Compensating (workflow.Order.GiveBack)", false, false, false},
	{330073597, false, "a give-back marked a call never made as may have run: a pivot it held ended its order CompensationFailed (outcome.Recorder.Release)", false, false, false},
	{350051285, false, "the reply of a give-back while the order was undone was rejected to the DLQ (message.DecodeSchedulerMessage)", false, false, false},
	{355317237, false, "a callback recorded before its Agent noted the acceptance left the async call's slot held to its CompleteBy (agent)", false, false, false},
	{344737826, false, "a cancel that gave back an accepted async call left its slot held to its CompleteBy (submission's cancel)", false, false, false},
	{419933401, false, "a refused held pivot, retried, was taken as may have run: undone, its order ended CompensationFailed (RetryHeld)", false, false, false},
	{588323654, false, "an operator's skip of a held step, while another ran, did not count as a write that finishes a step: that step's completion, decided before the skip, landed after it and the order stayed Pending with every step done (workflow.SkipHeld)", false, false, false},
	{864753638, false, "a give-back before its call forgot that an earlier attempt, given back after its request went (a 429 after a retry), may have taken effect: the step was never undone (statestore's look.Held)", false, false, false},
	{405096854, false, "a request delivered twice to one instance in the same millisecond took the first delivery's claim for its own lost answer (owner and time), and ran the attempt twice (statestore's claimedBy)", false, false, false},
	{405096864, false, "the same, found in the same run: two claims of one attempt (statestore's claimedBy)", false, false, false},
	{533470184, false, "a payload read that failed after the claim, before the call, was left to SQS: the claim refused the retry, the attempt ran out as one that may have run, and a step with no undo ended its order CompensationFailed, its service never called (agent.notCalled)", true, false, false},
	{884815293, false, "a key's slot whose hold was written, its answer lost, stayed held after its attempt was given back, to its CompleteBy (agent's holdSlot)", true, true, false},
	{484531356, false, "a claim written, its answer lost with the SDK's tries spent, refused itself when its request came back: the attempt ran out as one that may have run, and a step with no undo ended its order CompensationFailed, its service never called (statestore's updateItem reads the item back)", true, true, false},
	{484531498, false, "an operator's retry of a held step that may have run forgot so once a later attempt was given back before its call (a payload not read): cancelled, the step was never undone (statestore's look: Retry keeps mr)", true, true, false},
	{587908592, false, "a claim made whose deadline index entry was not pulled in (the store failed) was taken as not made: its request came back, its claim refused, and the attempt ran out as one that may have run (statestore.LateLook: the claim holds)", true, true, false},
	{587909018, false, "a refusal whose recording failed (the store failed) was left to SQS: the claim refused the retry, and the attempt ran out as one that may have run, its order CompensationFailed for a step that did nothing (agent's persist)", true, true, false},
	{587908706, false, "an async call accepted, its acceptance not noted (the store failed), held its key's slot to its CompleteBy: reported, as designed, and tried again first (agent's persist)", true, true, false},
	{186850431, false, "a 429 whose slow-down the store failed to note was left to SQS: the attempt ran out as one that may have run, though its service did nothing (agent's slowDown gives it back all the same)", true, true, false},
	{389796936, false, "a call whose rate turn waited a second after its flow control's check was made past its service's 429, four seconds on (agent's beforeCall checks again after the turn)", true, true, false},
	{469616230, false, "a 429 whose slow-down the store failed to note let the agent's other instances call on until a 429 of their own: reported by the Agent (agent.SlowDownNotNoted), and not counted against it", true, true, false},
	{991210170, false, "an async call's callback recorded, its slot's let-go failed (the store failed): reported with its holder (keyline.NotLetGo), and a cancel's the same, its undo started all the same", true, true, false},
	{469616195, false, "a cancel let an accepted async call's slot go, and another order's call took it before the undo was called: its service had one call of the key more in flight than the limit (the cancel passes the slot to the undo: keyline.Store.Pass)", true, true, false},
	{991208956, false, "the same, with a limit of 2", true, true, false},
	{772976488, true, "a cancel of 30 to 100 accepted async items wrote over 4 KB, refused (statestore.Store.Apply)", false, false, false},
	{772976568, true, "100 items timing out in one sweep wrote over 4 KB, refused (statestore.Store.Apply)", false, false, false},
	{532923155, false, "a step whose attempt its Agent gave back moved as a new record, attempt 0: moved away and back, it was claimed as attempt 1 again (statestore.Store.Migrate keeps counting)", false, false, true},
	{330794593, false, "a forEach step moved to another place had no count of items done there: every completion of its items was an invalid write (statestore.Store.Migrate)", false, false, true},
	{318305772, false, "a move that removed the last step while it was ready left an order with every step done and nothing to end it (workflow.Moving.Move refuses it)", false, false, true},
	{318305829, false, "a step a move left behind, added again by a move back, was claimed as attempt 1 again (statestore's Gone)", false, false, true},
	{172019436, false, "the checker took a step added with nothing to undo (undo: none), done in an order then undone, for an effect left undone (the explorer's check reads NothingToUndo)", false, false, true},
	{172020188, false, "the checker took a pivot whose claim was applied, its answer and its read back lost, for one that never ran, though the product cannot tell (the explorer's watched claim)", false, false, true},
}

// Orders of every small shape (lines, branches of different lengths, joins,
// a step per item, a wait, a timer, an async call), a few at once sharing a
// customer, each through a seeded interleaving of claims, answers,
// refusals, hangs, crashes, cancels, events, callbacks (before their call's
// answer too), lost, repeated and delayed messages, invocations at once and
// sweeps, with the flow control (rate limits, calls in flight per key,
// pauses, 429s with Retry-After) on the real state store: every order ends
// as it must, and every invariant holds. A failure prints its seed: go test
// -run TestExplore -explore.seed N -explore.runs 1.
func TestExplore(t *testing.T) {
	base := *seed
	if base == 0 {
		base = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	t.Logf("seed %d (replay: go test ./shared/devkit/explore -run TestExplore -explore.seed %d)", base, base)
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, start := context.Background(), time.Now()
			if *seed == 0 {
				// A large run takes moto four times as long, and what they
				// found (a write over 4 KB) the store decides before the engine.
				replay(ctx, t, e, fmt.Sprintf("r%d%s", base%10000, name[:1]), name != "moto")
			}
			rep, err := explore.Explore(ctx, e.Clients.DynamoDB, explore.Options{Seed: base, For: max(*duration-time.Since(start), 5*time.Second),
				Runs: *runs, Workers: 3, Large: *large, Prefix: fmt.Sprintf("x%d%s", base%10000, name[:1])})
			require.NoError(t, err)
			t.Logf("%s: %d runs, %d orders in %s (%d runs with faults), ended %v; %d held for their operator, decisions %v; drove %v; "+
				"largest expression %d bytes, item %d bytes", name, rep.Runs, rep.Orders, rep.Elapsed.Round(time.Second), rep.Faulty, rep.Ends,
				rep.Held, rep.Decided, rep.Drove, rep.LargestExpression, rep.LargestItem)
			for _, f := range rep.Failures {
				t.Errorf("%s", f)
			}
			require.Positive(t, rep.Runs)
		})
	}
}

// replayRunTime bounds a regression seed's run: one starved of CPU beside
// the others (CI ran seed 991210170 out of its minute on moto, under a load
// of ten: context deadline exceeded, while it passes in 24 s alone) is
// judged, not cut short; one that passes takes its own time.
const replayRunTime = 5 * time.Minute

// replay runs each regression seed once on e (the large ones if large),
// three at a time, each on tables of its own: none may fail again.
func replay(ctx context.Context, t *testing.T, e emulatortest.Engine, prefix string, large bool) {
	var wg sync.WaitGroup
	limit := make(chan struct{}, 3)
	for i, r := range regressions {
		if r.large && !large {
			continue
		}
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			rep, err := explore.Explore(ctx, e.Clients.DynamoDB, explore.Options{Seed: r.seed, Runs: 1, For: time.Hour, Workers: 1,
				Large: r.large, Plain: !r.payloads && !r.moves, NoStoreFaults: !r.store && !r.moves, NoPointers: !r.moves, NoHostile: !r.moves,
				NoMigrate: !r.moves, NoSearch: true, Changes: shapes.FirstChanges, Prefix: fmt.Sprintf("%s%d", prefix, i), RunTime: replayRunTime})
			if err != nil {
				t.Errorf("regression seed %d: %v", r.seed, err)
			}
			for _, f := range rep.Failures {
				t.Errorf("regression seed %d (%s) fails again: %s", r.seed, r.found, f)
			}
		})
	}
	wg.Wait()
}
