package console

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sas-go/sas/shared/operator"
)

// bulkPlan is a bulk action's dry run, kept for its confirmation: the
// action, the list it ran on, the orders it would act on, and, once
// confirmed, the run's report.
type bulkPlan struct {
	id       string
	spec     operator.ActionSpec
	search   operator.Search
	inFlight bool   // the In flight list (the deadline index), not a state's
	back     string // the orders page it came from
	label    string // the list and its search, in words
	ids      []string
	dry      operator.BulkReport
	report   *operator.BulkReport // the run's, once it ran
	started  bool
}

// keptPlans is how many bulk actions the console keeps.
const keptPlans = 20

// bulkPlans keeps the last bulk actions, by a random id.
type bulkPlans struct {
	mu    sync.Mutex
	m     map[string]*bulkPlan
	order []string
}

// put keeps p and returns its id.
func (b *bulkPlans) put(p *bulkPlan) string {
	buf := make([]byte, 12)
	_, _ = rand.Read(buf)
	p.id = hex.EncodeToString(buf)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*bulkPlan{}
	}
	b.m[p.id] = p
	if b.order = append(b.order, p.id); len(b.order) > keptPlans {
		delete(b.m, b.order[0])
		b.order = b.order[1:]
	}
	return p.id
}

// get is a copy of the plan id names.
func (b *bulkPlans) get(id string) (bulkPlan, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.m[id]
	if !ok {
		return bulkPlan{}, false
	}
	return *p, true
}

// start marks the plan confirmed: false if it was already (a second
// confirmation, a reload), or is not kept.
func (b *bulkPlans) start(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.m[id]
	if !ok || p.started {
		return false
	}
	p.started = true
	return true
}

// done keeps the run's report.
func (b *bulkPlans) done(id string, rep operator.BulkReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.m[id]; ok {
		p.report = &rep
	}
}

// bulkView is a bulk action's page: its dry run, with the confirmation's
// form, or its report.
type bulkView struct {
	ID      string
	Action  string
	Label   string // the list and its search
	Back    string
	Report  operator.BulkReport
	Rows    []bulkRow
	More    int // orders listed and not shown
	Reasons []reasonCount
	Confirm bool // the dry run may be confirmed
	Count   int  // the orders it would act on
	TooMany bool // more than Max: not from the console
	Max     int
	Takes   string // about how long the run takes, paced
	Rate    int    // orders a second, at most
}

// bulkRow is one order's outcome, in words.
type bulkRow struct {
	OrderID, Outcome, Label, Text string
}

// reasonCount is how many orders one reason refused.
type reasonCount struct {
	Why   string
	Count int
}

// bulkViewOf is the page of plan p showing rep (its dry run's, or its
// run's).
func (s *Server) bulkViewOf(p bulkPlan, rep operator.BulkReport) bulkView {
	v := bulkView{ID: p.id, Action: p.spec.Name, Label: p.label, Back: p.back, Report: rep, Count: len(p.ids),
		Max: s.cfg.BulkMax, More: rep.Listed - rep.Left - len(rep.Orders)}
	v.Confirm = rep.DryRun && p.id != "" && !p.started
	v.TooMany = rep.DryRun && len(p.ids) > s.cfg.BulkMax
	v.Takes, v.Rate = bulkTime(len(p.ids)).String(), operator.BulkRate
	for _, r := range rep.Orders {
		v.Rows = append(v.Rows, bulkRow{OrderID: r.OrderID, Outcome: r.Outcome, Label: outcomeLabel(p.spec.Name, r.Outcome),
			Text: cmp.Or(r.Why, r.What)})
	}
	for _, why := range slices.Sorted(maps.Keys(rep.Why)) {
		v.Reasons = append(v.Reasons, reasonCount{Why: why, Count: rep.Why[why]})
	}
	slices.SortStableFunc(v.Reasons, func(a, b reasonCount) int { return b.Count - a.Count })
	return v
}

// outcomeLabel is a bulk outcome in words.
func outcomeLabel(action, outcome string) string {
	switch outcome {
	case operator.BulkWould:
		return "would " + action
	case operator.BulkAlready:
		return "done already"
	case operator.BulkChanged:
		return "changed since listed"
	}
	return outcome
}

// Heading is the page's heading.
func (v bulkView) Heading() string {
	if v.Report.DryRun {
		return fmt.Sprintf("Dry run: %s %s", v.Action, v.Label)
	}
	return fmt.Sprintf("Bulk %s: %s", v.Action, v.Label)
}

// Button is the confirmation's button.
func (v bulkView) Button() string {
	orders := "orders"
	if v.Count == 1 {
		orders = "order"
	}
	return fmt.Sprintf("%s these %d %s", strings.ToUpper(v.Action[:1])+v.Action[1:], v.Count, orders)
}
