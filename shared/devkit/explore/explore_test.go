package explore_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/explore"
)

var engines = map[string]emulatortest.Engine{}

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithEngines(m, engines)) }

var (
	seed     = flag.Uint64("explore.seed", 0, "the first run's seed (0: from the clock)")
	duration = flag.Duration("explore.for", 30*time.Second, "how long each engine explores (the long mode: -explore.for 30m)")
	runs     = flag.Int("explore.runs", 0, "stop after this many runs per engine (1 with -explore.seed replays one)")
)

// Orders of every small shape (lines, branches of different lengths, joins,
// a step per item, a wait, a timer, an async call), each through a seeded
// interleaving of claims, answers, refusals, hangs, crashes, cancels,
// events, callbacks, lost, repeated and delayed messages and sweeps, on the
// real state store: every order ends, and every invariant holds. A failure
// prints its seed: go test -run TestExplore -explore.seed N -explore.runs 1.
func TestExplore(t *testing.T) {
	base := *seed
	if base == 0 {
		base = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	t.Logf("seed %d (replay: go test ./shared/devkit/explore -run TestExplore -explore.seed %d)", base, base)
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep, err := explore.Explore(context.Background(), e.Clients.DynamoDB, explore.Options{Seed: base, For: *duration,
				Runs: *runs, Workers: 3, Prefix: fmt.Sprintf("x%d%s", base%10000, name[:1])})
			require.NoError(t, err)
			t.Logf("%s: %d orders in %s (%d with faults), ended %v; %d held for their operator, decisions %v", name, rep.Runs,
				rep.Elapsed.Round(time.Second), rep.Faulty, rep.Ends, rep.Held, rep.Decided)
			for _, f := range rep.Failures {
				t.Errorf("%s", f)
			}
			require.Positive(t, rep.Runs)
		})
	}
}
