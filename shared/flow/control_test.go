package flow_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/workflow"
)

// readCounter counts the control reads made through it.
type readCounter struct {
	flow.DB
	reads atomic.Int64
}

func (r *readCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.reads.Add(1)
	return r.DB.GetItem(ctx, in, opts...)
}

// The calls of a batch ask for their agent's control at once: on an instance
// that has not read it (its first batch, or after an idle spell) one of them
// reads it and the others wait for that read, each told what it read (a
// pause) and none reading again: one consistent read a batch, not one a
// call (sasctl bench counted ten).
func TestABatchReadsItsAgentsControlOnce(t *testing.T) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := &readCounter{DB: e.Clients.DynamoDB}
			s := flow.NewStore(db, storetest.NewTables(t, e.Clients.DynamoDB).StateTable())
			_, err := s.Pause(ctx, "payment", "ops", t0)
			require.NoError(t, err)
			g := &flow.Gate{Store: s}
			batch := func(now time.Time) []flow.Verdict {
				verdicts := make([]flow.Verdict, 10)
				var wg sync.WaitGroup
				for i := range verdicts {
					wg.Go(func() {
						v, err := g.Admit(ctx, "payment", workflow.Rate{}, time.Time{}, now)
						require.NoError(t, err)
						verdicts[i] = v
					})
				}
				wg.Wait()
				return verdicts
			}
			for _, v := range batch(t0) {
				require.Equal(t, flow.PausedWait, v.Wait, "every call is told the pause")
			}
			require.Equal(t, int64(1), db.reads.Load(), "one read for the batch")
			_, err = s.Resume(ctx, "payment")
			require.NoError(t, err)
			for _, v := range batch(t0.Add(flow.PausedWait)) { // after an idle spell
				require.Zero(t, v.Wait, "resumed while the instance was idle: read afresh")
			}
			require.Equal(t, int64(2), db.reads.Load(), "one read for the batch after the idle spell")
		})
	}
}
