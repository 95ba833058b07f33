package localrun_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// Each order's event is sent 0-500 ms after the order, as a webhook does:
// every event is taken (none refused, none lost), and the test reports how
// long after the order reached its wait (or the event was sent, if later)
// the wait was done. SAS_EVENT_ORDERS sets how many (20 in CI; the closing
// note's figure is from 100). The figures are printed, not asserted.
func TestEventsSentRightAfterTheirOrdersAreTaken(t *testing.T) {
	t.Parallel()
	n := 20
	if v, err := strconv.Atoi(os.Getenv("SAS_EVENT_ORDERS")); err == nil && v > 0 {
		n = v
	}
	e := newEnv(t, remotesim.Faults{}, running(t, approval("1h", "")))
	ctx := context.Background()
	sent := make([]time.Time, n)
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("o-ev%03d", i)
		wg.Go(func() {
			o := localrun.DemoOrder(ids[i], 1)
			if err := e.stack.SendOrders(ctx, o.JSON()); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Duration(rand.IntN(501)) * time.Millisecond)
			sent[i] = time.Now()
			errs <- e.stack.Signal(ctx, message.Event{OrderID: ids[i], Event: "approved", EventID: "e-" + ids[i],
				Data: []byte(`{"amountCents":1998,"by":"ana"}`)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	tasks := e.waitEnded(ids)
	var lat []time.Duration
	early := 0
	for i, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
		wait := e.step(id, 1)
		from := wait.ReadyAt
		if sent[i].After(from) {
			from = sent[i]
		} else {
			early++ // kept: taken as the wait is armed
		}
		lat = append(lat, max(wait.DoneAt.Sub(from), 0))
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	t.Logf("%d orders, each event sent 0-500 ms after its order (%d of them before the order reached its wait): the wait done "+
		"after it was ready (or the event sent, if later): p50 %s, p99 %s, max %s", n, early, pct(0.50).Round(time.Millisecond),
		pct(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}
