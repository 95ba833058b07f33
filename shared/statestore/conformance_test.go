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

func TestConformance(t *testing.T) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) *statestore.Store { return storetest.NewStore(t, e.Clients.DynamoDB) })
		})
	}
}

// An ended order carries its expiry on both tables, on every engine.
func TestRetention(t *testing.T) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Retention(t, e.Clients.DynamoDB)
		})
	}
}

// An order stays in the deadline index's shard Submission picked, on
// every engine, whoever writes it.
func TestAnOrderKeepsItsShard(t *testing.T) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.OwnShard(t, e.Clients.DynamoDB)
		})
	}
}

// The documented limits, at the limit, on every engine.
func TestALostAnswerIsTheWriteItself(t *testing.T) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.LostAnswers(t, e.Clients.DynamoDB)
		})
	}
}

func TestLimits(t *testing.T) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Limits(t, e.Clients.DynamoDB)
		})
	}
}

func TestPayloads(t *testing.T) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Payloads(t, e.Clients)
		})
	}
}
