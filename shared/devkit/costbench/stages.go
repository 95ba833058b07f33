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
	s, meter, err := meteredStore(ctx, endpoint, def, "stages")
	if err != nil {
		return nil, err
	}
	w := &walk{ctx: ctx, s: s, meter: meter, id: "stages-1", now: time.Now()}
	for _, lw := range lifeWrites(ctx, s, def, w.id, 1) {
		w.do(lw.what, lw.do)
	}
	return w.stages, w.err
}

// meteredStore is a state store as deployed, on new tables (named from
// prefix) of the DynamoDB engine at endpoint, with def's definition stored,
// and the meter of its requests, reset.
func meteredStore(ctx context.Context, endpoint string, def workflow.Definition, prefix string) (*statestore.Store, *accounting.Meter, error) {
	meter := accounting.NewForDynamoDBLocal()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: endpoint, Emulated: true,
		APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
	if err != nil {
		return nil, nil, err
	}
	topo := topology.Default(fmt.Sprintf("%s%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1)), def.Agents()...)
	if err := provision.EnsureTables(ctx, c.DynamoDB, topo); err != nil {
		return nil, nil, err
	}
	// As deployed: an ended order's items carry their expiry.
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).
		WithRetention(deployment.RetentionDaysDefault * 24 * time.Hour)
	// The workflow version's definition is stored once per version (by the
	// first Submission of a process): not an order's write.
	if err := s.PutDefinition(ctx, def); err != nil {
		return nil, nil, fmt.Errorf("store the definition of %s: %w", def.Name, err)
	}
	meter.Reset()
	return s, meter, nil
}

// Kinds of an order's writes on its happy path (lifeWrite.kind): what
// DynamoDB is asked to do, whoever asks.
const (
	KindSubmit   = "submit"   // TransactWriteItems: the order, its state item, its index entry
	KindClaim    = "claim"    // UpdateItem of the state item, conditional, ALL_NEW back
	KindComplete = "complete" // UpdateItem: a step done, the next made ready
	KindEnd      = "end"      // UpdateItem: the last step done, the order ended (leaves the index); UpdateItem: the end counted in its workflow's health
)

// lifeWrite is one write of an order's happy path, as the handlers make it.
type lifeWrite struct {
	what string // who writes what
	kind string // KindSubmit, KindClaim…
	do   func(now time.Time) error
}

// lifeWrites are order id's writes of its happy path on s, from its
// submission to its end, in their order: each one runs on what the ones
// before left (a completion on its claim's read). i chooses the order's
// content (localrun.DemoOrder).
func lifeWrites(ctx context.Context, s *statestore.Store, def workflow.Definition, id string, i int) []lifeWrite {
	out := []lifeWrite{{what: "Submission: TransactWriteItems (order, state item, index entry)", kind: KindSubmit,
		do: func(now time.Time) error {
			_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: localrun.DemoOrder(id, i).JSON(), Workflow: def, Now: now})
			return err
		}}}
	for i, st := range def.Steps {
		ref := workflow.Ref{Index: i}
		var claimed statestore.Step
		out = append(out, lifeWrite{what: fmt.Sprintf("agent-%s: claim %s", st.Agent, st.Name), kind: KindClaim,
			do: func(now time.Time) (err error) {
				claimed, err = s.Claim(ctx, statestore.Claim{OrderID: id, Ref: ref, Agent: st.Agent, Owner: "3fa9c2d1e0b4", Now: now})
				return err
			}})
		what, kind := "agent-"+st.Agent+": record "+st.Name+" done, make the next step ready", KindComplete
		if i == len(def.Steps)-1 {
			what, kind = "agent-"+st.Agent+": record "+st.Name+" done, end the order (leaves the index), count the end", KindEnd
		}
		out = append(out, lifeWrite{what: what, kind: kind, do: func(now time.Time) error {
			a := outcome.Attempt{OrderID: id, Ref: ref, Name: st.Name, Attempt: claimed.Attempt, Round: 1, Read: claimed.Read, Now: now}
			rec, err := outcome.Recorder{Store: s}.Record(ctx, def, a)
			if err == nil && rec.Stale {
				err = fmt.Errorf("%s of %s: recorded as stale", st.Name, id)
			}
			return err
		}})
	}
	return out
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

func (w *walk) do(what string, write func(now time.Time) error) {
	if w.err != nil {
		return
	}
	w.now = w.now.Add(100 * time.Millisecond)
	w.meter.Reset()
	if w.err = write(w.now); w.err != nil {
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
