package explore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/seal"
)

// rateSlack is how far the explorer's clock may lag the moment an Agent's
// call was admitted at: its gate's clock moves by its sleeps alone (a
// virtual Gate), and the explorer wakes a sleeper at its time or later.
const rateSlack = 100 * time.Millisecond

// checkFlow checks the flow control of the run: the service never saw more
// calls in flight per key than the limit, nor more calls in any window than
// the rate and its burst allow, and every slot of a key was let go when its
// attempt ended.
func (w *World) checkFlow(ctx context.Context) []string {
	bad := slices.Clone(w.svc.over)
	for _, a := range slices.Sorted(maps.Keys(w.flows)) {
		f := w.flows[a]
		if f.rate.Calls > 0 {
			bad = append(bad, rateKept(a, f, w.svc.calls[a])...)
		}
		if f.perKey != nil {
			bad = append(bad, w.slotsLetGo(ctx, a)...)
		}
	}
	return bad
}

// rateKept checks that calls (agent a's, in the explorer's time) kept its
// rate: any k calls in a row span at least (k - burst) intervals (GCRA's
// bound: no window holds more calls than its length allows and the burst).
func rateKept(a string, f agentFlow, calls []time.Time) []string {
	times := slices.Clone(calls)
	slices.SortFunc(times, func(x, y time.Time) int { return x.Compare(y) })
	burst, interval := max(f.rate.Burst, 1), f.rate.Interval()
	for i := range times {
		for j := i + burst; j < len(times); j++ {
			need := f.rate.Span(int64(j - i + 1 - burst)) // exact: Interval rounds each turn down to the nanosecond
			if times[j].Sub(times[i])+rateSlack < need {
				return []string{fmt.Sprintf("the rate kept: agent %s's service saw %d calls from %s to %s, over %s (at most %d in %s)",
					a, j-i+1, times[i].Format("15:04:05.000"), times[j].Format("15:04:05.000"), f.rate,
					burst+int(times[j].Sub(times[i])/interval), times[j].Sub(times[i]))}
			}
		}
	}
	return nil
}

// slotsLetGo checks that no slot of agent a's keys is held by an attempt
// of the run's orders, all ended (heldPastItsEnd); and, if no message was
// lost, that no call of theirs still waits in a key's line.
func (w *World) slotsLetGo(ctx context.Context, a string) []string {
	var bad []string
	customers := map[string]bool{}
	for _, o := range w.orders {
		customers[o.customer] = true
	}
	for _, c := range slices.Sorted(maps.Keys(customers)) {
		name, err := w.keyName(ctx, a, c)
		if err != nil {
			return append(bad, err.Error())
		}
		k, err := w.lines.Key(ctx, a, name)
		if err != nil {
			return append(bad, err.Error())
		}
		if name != c && w.wasUpdated(keyname.SecretOwner(a), "key/"+c) {
			bad = append(bad, fmt.Sprintf("a sealed run keeps no key by its value: agent %s's key %s was written", a, c))
		}
		for _, h := range slices.Sorted(maps.Keys(k.Holders)) {
			if w.orderOf(h) == nil || keyline.WaiterOf(h) == h || !w.heldPastItsEnd(h, k.Holders[h]) ||
				w.reported(keyline.NotLetGo, "holder", h) || w.reported(agent.AcceptNotNoted, "holder", h) {
				continue
			}
			bad = append(bad, fmt.Sprintf("every slot let go: agent %s's key %s is still held by %s (until %s), its order ended",
				a, c, h, k.Holders[h].Format("15:04:05.000")))
		}
		for _, wt := range k.Waiters {
			if w.orderOf(wt.ID) != nil && w.dropped == 0 && !w.reported(keyline.NotOutOfLine, "waiter", wt.ID) {
				bad = append(bad, fmt.Sprintf("no ended order waits: %s is still in agent %s's key %s's line", wt.ID, a, c))
			}
		}
	}
	return bad
}

// keyName is customer c's key as agent a's items keep it: in a sealed run,
// its name under the agent's secret (keyname.Namer), read without faults.
func (w *World) keyName(ctx context.Context, a, c string) (string, error) {
	if w.secretKeys == nil {
		return c, nil
	}
	w.secretKeys.mu.Lock()
	w.secretKeys.faulty = false // the check's own reads: the run is over
	w.secretKeys.mu.Unlock()
	return keyname.NewNamer(w.db, w.topo.StateTable(), a, seal.New(w.secretKeys, explorerKey)).Name(ctx, c)
}

// wasUpdated reports whether the run updated the item of key pk and sk.
func (w *World) wasUpdated(pk, sk string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written[pk+" "+sk]
}

// reported reports whether, in a run with state store faults, a handler
// logged msg with attr's value v: a slot it could not let go, or a call it
// could not take out of its key's line, when the store failed (each ends by
// itself: at its attempt's CompleteBy, after keyline.ReserveFor).
func (w *World) reported(msg, attr, v string) bool {
	if !w.storeFaults {
		return false
	}
	for line := range strings.Lines(w.logs.String()) {
		if strings.Contains(line, msg) && (strings.Contains(line, " "+attr+"="+v+" ") || strings.Contains(line, " "+attr+"="+strconv.Quote(v)+" ")) {
			return true
		}
	}
	return false
}

// heldPastItsEnd reports whether holder, an attempt's, still holds its slot
// though the attempt ended while its hold (until until) was on: a call
// lets its slot go when it ends; an async call accepted, when its callback
// is taken, and else at its CompleteBy by itself (it stays listed).
func (w *World) heldPastItsEnd(holder string, until time.Time) bool {
	if !w.svc.accepted[holder] {
		return true
	}
	at, ok := w.svc.calledBack[holder]
	return ok && at.Before(until)
}
