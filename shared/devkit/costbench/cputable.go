package costbench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sas-go/sas/shared/devkit/accounting"
)

// CPURow is one kind of request's share of a DynamoDB engine's CPU in a
// burst: how many an order made, and what each cost the engine alone.
type CPURow struct {
	Kind string `json:"kind"`
	// Who made them: the functions ("agents" for every agent), or the
	// progress polls of sasctl demo (the burst's untagged requests).
	Who string `json:"who"`
	// PerOrder are the requests per order; for KindBatchGetItem the items
	// read, for KindIdle the seconds.
	PerOrder   float64 `json:"perOrder"`
	MsEach     float64 `json:"cpuMsEach"` // 0: not measured alone
	MsPerOrder float64 `json:"cpuMsPerOrder"`
	// Share is MsPerOrder's share of the engine's CPU per order measured
	// over the burst.
	Share float64 `json:"share"`
}

// Polls names the burst's untagged requests: the progress polls.
const Polls = "sasctl demo's progress polls"

// CPUTable shares the engine's CPU in burst b among the kinds of request
// made, each at its cost measured alone (MeasureEngine's k); steps is the
// workflow's: of the UpdateItems the functions made (the Supervisor's
// apart), steps an order are claims and the rest completions. The rows come
// by their CPU per order, the most first; a request of no measured kind
// has a row with no CPU.
func CPUTable(b BurstResult, k map[string]KindCost, steps int) []CPURow {
	n := float64(max(b.Orders, 1))
	measured := 1000 * b.EngineCPUSeconds / n
	type group struct{ kind, who string }
	per := map[group]float64{}
	whos := map[string][]string{} // the functions of the writes claims and completions share
	for key, u := range b.Counts {
		if key.Service != "DynamoDB" {
			continue
		}
		kind, who := requestKind(key)
		units := float64(u.Requests)
		if kind == KindBatchGetItem {
			units = u.ReadUnits // a consistent read: a unit an item under 4 KB
			if key.Function == "" {
				units *= 2 // the polls read eventually consistent: half a unit an item
			}
		}
		if kind == KindClaim {
			whos[kind] = appendNew(whos[kind], who)
			who = ""
		}
		per[group{kind, who}] += units / n
	}
	if u, ok := per[group{KindClaim, ""}]; ok {
		delete(per, group{KindClaim, ""})
		who := strings.Join(whos[KindClaim], ", ")
		per[group{KindClaim, who}] = min(u, float64(steps))
		if u > float64(steps) {
			per[group{KindComplete, who}] = u - float64(steps)
		}
	}
	per[group{KindIdle, "DynamoDB Local itself"}] = b.Seconds / n
	complete := k[KindComplete].add(k[KindEnd])
	var rows []CPURow
	for g, perOrder := range per {
		cost := k[g.kind]
		if g.kind == KindComplete {
			cost = complete
		}
		r := CPURow{Kind: g.kind, Who: g.who, PerOrder: perOrder, MsEach: cost.MsEach()}
		r.MsPerOrder = r.PerOrder * r.MsEach
		if measured > 0 {
			r.Share = r.MsPerOrder / measured
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b CPURow) int {
		return cmp.Or(cmp.Compare(b.MsPerOrder, a.MsPerOrder), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Who, b.Who))
	})
	return rows
}

// requestKind is the kind of a request counted under key, and who made it.
func requestKind(key accounting.Key) (kind, who string) {
	who = key.Function
	switch {
	case who == "":
		who = Polls
	case strings.HasPrefix(who, "agent-"):
		who = "agents"
	}
	switch key.Operation {
	case "TransactWriteItems":
		return KindSubmit, who
	case "UpdateItem":
		if key.Function == "supervisor" {
			return KindMoveOn, who
		}
		return KindClaim, who
	case "PutItem":
		if strings.HasPrefix(key.Function, "agent-") {
			return KindResult, who
		}
	case "GetItem":
		return KindGet, who
	case "BatchGetItem":
		return KindBatchGetItem, who
	case "Query":
		if strings.HasPrefix(key.Function, "agent-") {
			return KindResults, who
		}
		return KindQuery, who
	}
	return key.Operation + " (not measured alone)", who
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(slices.Clone(list), s)
}

// PrintCPUTable writes the rows, and what they add up to beside what the
// engine took over the burst.
func PrintCPUTable(w io.Writer, b BurstResult, rows []CPURow) {
	n := float64(max(b.Orders, 1))
	fmt.Fprintf(w, "DynamoDB Local's CPU in a burst of %d orders (drained in %.1f s, %.1f CPU s, %.2f ms an order),\n"+
		"by kind of request: requests per order (the meter's counts) × CPU ms each (measured alone)\n\n",
		b.Orders, b.Seconds, b.EngineCPUSeconds, 1000*b.EngineCPUSeconds/n)
	fmt.Fprintf(w, "%-34s %-30s %10s %12s %14s %7s\n", "kind", "who", "per order", "CPU ms each", "CPU ms/order", "share")
	var sum float64
	for _, r := range rows {
		each := fmt.Sprintf("%12.3f", r.MsEach)
		if r.MsEach == 0 {
			each = fmt.Sprintf("%12s", "-")
		}
		fmt.Fprintf(w, "%-34s %-30s %10.3f %s %14.3f %6.1f%%\n", label(r.Kind), r.Who, r.PerOrder, each, r.MsPerOrder, 100*r.Share)
		sum += r.MsPerOrder
	}
	fmt.Fprintf(w, "%-34s %-30s %10s %12s %14.3f %6.1f%%\n", "the rows together", "", "", "", sum, 100*sum/max(1000*b.EngineCPUSeconds/n, 1e-9))
	fmt.Fprintln(w, "(per order: items read for a BatchGetItem, seconds for idle; of the UpdateItems the functions made, the\n"+
		"Supervisor's apart, one a step is a claim and the rest completions)")
	fmt.Fprintln(w, "\nThe burst's DynamoDB requests per order, as the meter counted them:")
	keys := slices.SortedFunc(maps.Keys(b.Counts), func(a, b accounting.Key) int {
		return cmp.Or(strings.Compare(a.Function, b.Function), strings.Compare(a.Operation, b.Operation))
	})
	for _, k := range keys {
		if u := b.Counts[k]; k.Service == "DynamoDB" {
			fmt.Fprintf(w, "    %-18s %-20s %8.3f requests, %7.3f read units, %7.3f write units, %6.3f refused\n",
				cmp.Or(k.Function, "(polls)"), k.Operation, float64(u.Requests)/n, u.ReadUnits/n, u.WriteUnits/n, float64(u.Refused)/n)
		}
	}
}

// kindLabels say what each kind of request is, for the table.
var kindLabels = map[string]string{
	KindSubmit:       "TransactWriteItems: submission",
	KindClaim:        "UpdateItem: claim (ALL_NEW)",
	KindComplete:     "UpdateItem: completion",
	KindResult:       "PutItem: a step's result",
	KindGet:          "GetItem, consistent",
	KindBatchGetItem: "BatchGetItem (per item)",
	KindQuery:        "Query: deadline index page",
	KindResults:      "Query: an order's results",
	KindMoveOn:       "UpdateItem: Supervisor's move-on",
	KindIdle:         "idle (per second)",
}

// label is what the table calls kind.
func label(kind string) string { return cmp.Or(kindLabels[kind], kind) }
