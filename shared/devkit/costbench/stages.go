package costbench

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Stage is an order's state item after one write of its life.
type Stage struct {
	Write      string  `json:"write"`      // who wrote what
	ItemBytes  int     `json:"itemBytes"`  // the item after it, as DynamoDB sizes it for capacity
	WriteUnits float64 `json:"writeUnits"` // what the write was billed, index entries included
}

// Lifecycle walks one order of the workflow through the state store on the
// DynamoDB engine at endpoint, the happy path, with the very writes the
// handlers make, and says what each one cost and left behind. It is where
// the money for DynamoDB goes: a write is billed a unit per started KB of the
// larger of the item before and after it.
func Lifecycle(ctx context.Context, endpoint string, def workflow.Definition) ([]Stage, error) {
	meter := accounting.NewForDynamoDBLocal()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: endpoint, Emulated: true,
		APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
	if err != nil {
		return nil, err
	}
	topo := topology.Default(fmt.Sprintf("stages%d-%d", time.Now().UnixNano()%1e6, seq.Add(1)), def.Agents()...)
	if err := provision.EnsureTables(ctx, c.DynamoDB, topo); err != nil {
		return nil, err
	}
	// As deployed: an ended order's items carry their expiry.
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).
		WithRetention(deployment.RetentionDaysDefault * 24 * time.Hour)
	// The workflow version's definition is stored once per version (by the
	// first Submission of a process): not an order's write.
	if err := s.PutDefinition(ctx, def); err != nil {
		return nil, err
	}
	meter.Reset()
	w := &walk{ctx: ctx, s: s, meter: meter, id: "stages-1", now: time.Now()}
	w.do("Submission: TransactWriteItems (order, state item, index entry)", func() error {
		_, err := s.Submit(ctx, statestore.Submission{OrderID: w.id, Order: localrun.DemoOrder(w.id, 1).JSON(),
			Workflow: def, Now: w.now})
		return err
	})
	for i, st := range def.Steps {
		ref := workflow.Ref{Index: i}
		var claimed statestore.Step
		w.do(fmt.Sprintf("agent-%s: claim %s", st.Agent, st.Name), func() (err error) {
			claimed, err = s.Claim(ctx, statestore.Claim{OrderID: w.id, Ref: ref, Agent: st.Agent,
				Owner: "3fa9c2d1e0b4", Now: w.now})
			return err
		})
		a := outcome.Attempt{OrderID: w.id, Ref: ref, Name: st.Name, Attempt: claimed.Attempt, Round: 1, Read: claimed.Read, Now: w.now}
		what := "agent-" + st.Agent + ": record " + st.Name + " done, make the next step ready"
		if i == len(def.Steps)-1 {
			what = "agent-" + st.Agent + ": record " + st.Name + " done, end the order (leaves the index)"
		}
		w.do(what, func() error {
			rec, err := outcome.Recorder{Store: s}.Record(ctx, def, a)
			if err == nil && rec.Stale {
				err = fmt.Errorf("%s: recorded as stale", st.Name)
			}
			return err
		})
	}
	return w.stages, w.err
}

// walk runs one order's writes, recording each.
type walk struct {
	ctx    context.Context
	s      *statestore.Store
	meter  *accounting.Meter
	id     string
	now    time.Time
	stages []Stage
	err    error
}

func (w *walk) do(what string, write func() error) {
	if w.err != nil {
		return
	}
	w.now = w.now.Add(100 * time.Millisecond)
	w.meter.Reset()
	if w.err = write(); w.err != nil {
		w.err = fmt.Errorf("%s: %w", what, w.err)
		return
	}
	var units float64
	for _, u := range w.meter.Snapshot() {
		units += u.WriteUnits
	}
	size, err := w.s.ItemBytes(w.ctx, w.id)
	if err != nil {
		w.err = err
		return
	}
	w.stages = append(w.stages, Stage{Write: what, ItemBytes: size, WriteUnits: units})
}
