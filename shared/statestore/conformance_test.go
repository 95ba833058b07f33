package statestore_test

import (
	"os"
	"testing"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/statestore"
)

var engines = map[string]emulatortest.Engine{}

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithEngines(m, engines)) }

// onEveryEngine runs test on each engine, side by side.
func onEveryEngine(t *testing.T, test func(t *testing.T, e emulatortest.Engine)) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, e)
		})
	}
}

func TestConformance(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) {
		storetest.Run(t, func(t *testing.T) *statestore.Store { return storetest.NewStore(t, e.Clients.DynamoDB) })
	})
}

// An ended order carries its expiry on both tables, on every engine.
func TestRetention(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.Retention(t, e.Clients.DynamoDB) })
}

// An order stays in the deadline index's shard Submission picked, on
// every engine, whoever writes it.
func TestAnOrderKeepsItsShard(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.OwnShard(t, e.Clients.DynamoDB) })
}

// An order stored before its item kept its shard, resubmitted by an
// operator told more shards than the deployment has, goes where the
// deployment's Supervisor sweeps, on every engine.
func TestALegacyOrderResubmittedGoesWhereTheSupervisorSweeps(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.LegacyShard(t, e.Clients.DynamoDB) })
}

// An operator keeps an order stored before orders kept their retention as
// long as its deployment keeps one, on every engine.
func TestAnOperatorKeepsALegacyOrderForTheDeploymentsRetention(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.OperatorRetention(t, e.Clients) })
}

// A write whose answer is lost, tried again, is the write itself, on every
// engine.
func TestALostAnswerIsTheWriteItself(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.LostAnswers(t, e.Clients.DynamoDB) })
}

// The documented limits, at the limit, on every engine.
func TestLimits(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.Limits(t, e.Clients.DynamoDB) })
}

func TestPayloads(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.Payloads(t, e.Clients) })
}

// A sealed 16 MB order and result, kept in the object form, read back
// whole within a 128 MB Agent's budget, on every engine.
func TestSealedPayloads(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.SealedPayloads(t, e.Clients) })
}

// A move that rewrites a sealed order's data and result keeps them sealed
// under the order's key, beside the order, on every engine.
func TestAMoveRewritesSealedData(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.MovedSealedData(t, e.Clients) })
}

// Orders found by a searchable field's index, by where they are, and by a
// field a sealed deployment keeps as its keyed hash, on every engine.
func TestSearch(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.Search(t, e.Clients) })
}

// The ends an operator's own writes make (a cancel, an undo and a skip of
// a held order) are put in the metrics the failure rate alarm and the
// dashboard read, each once, on every engine.
func TestAnOperatorsEndsAreInTheMetricsTheAlarmReads(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.OperatorEnds(t, e.Clients) })
}

// The health view counts each order in flight by what it waits for (an
// event, a timer, a callback, its flow control, held, at work), read from
// the store, on every engine.
func TestTheHealthSaysWhatEachOrderInFlightWaitsFor(t *testing.T) {
	onEveryEngine(t, func(t *testing.T, e emulatortest.Engine) { storetest.HealthWaits(t, e.Clients) })
}
