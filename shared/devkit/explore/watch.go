package explore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// What the explorer watches of the handlers: their logs, their alerts, and
// each claim an Agent makes.

// logs keeps the handlers' logs of the world, for a failure's report, and
// whether any said that the state store refused a write as too large.
type logs struct {
	mu       sync.Mutex
	b        bytes.Buffer
	tooLarge []string
}

// tooLargeText is how statestore.ErrTooLarge reads in a log line.
var tooLargeText = []byte(statestore.ErrTooLarge.Error())

func (l *logs) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes.Contains(b, tooLargeText) && len(l.tooLarge) < 3 {
		l.tooLarge = append(l.tooLarge, strings.TrimSpace(string(b)))
	}
	if l.b.Len() < 1<<20 {
		l.b.Write(b)
	}
	return len(b), nil
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// publisher takes the alerts.
type publisher struct{ w *World }

func (p publisher) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	var f alert.Failure
	if err := json.Unmarshal([]byte(*in.Message), &f); err != nil {
		return nil, err
	}
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	p.w.alerts = append(p.w.alerts, f)
	return &sns.PublishOutput{}, nil
}

// watchedStore is the store as the Agents see it, each claim noted.
type watchedStore struct {
	*statestore.Store
	w *World
}

// Claim implements agent.Store, noting whether the record's needs were all
// done in the order the claim returned.
func (s watchedStore) Claim(ctx context.Context, c statestore.Claim) (statestore.Step, error) {
	st, err := s.Store.Claim(ctx, c)
	var late *statestore.LateLook
	if errors.Is(err, errLost) {
		// Applied or not, its claimant cannot tell (its read back failed
		// too): if it was, the product takes the attempt as one that may
		// have run when its CompleteBy passes, and so does the checker.
		if rec, rerr := s.w.store.Record(ctx, c.OrderID, c.Ref); rerr == nil && rec.State == workflow.Processing {
			s.w.mu.Lock()
			s.w.svc.mayRun[s.w.key(rec)] = true
			s.w.mu.Unlock()
		}
	}
	if err == nil || errors.As(err, &late) {
		met := s.w.needsMet(st)
		s.w.mu.Lock()
		s.w.claims = append(s.w.claims, claimed{order: st.OrderID, key: s.w.key(st), ref: st.Ref, attempt: st.Attempt,
			completeBy: st.CompleteBy, needsMet: met})
		s.w.mu.Unlock()
		s.w.note("  claimed %s/%s attempt %d", st.OrderID, st.RecordName(), st.Attempt)
	}
	return st, err
}

// needsMet reports whether every record of the steps st's step needs is
// Processed in the order its claim returned (an undo's: trivially).
func (w *World) needsMet(st statestore.Step) bool {
	if st.Undo || st.Read == nil {
		return true
	}
	o := st.Read.Order()
	for _, n := range w.defOf(st.WfVersion).Needs(st.Index) {
		for ref, r := range o.Recs {
			if ref.Index == n && !ref.Undo && r.State != workflow.Processed {
				return false
			}
		}
	}
	return true
}
