package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sas-go/sas/shared/offload"
)

// maxItemBytes is DynamoDB's limit on an item.
const maxItemBytes = 400 << 10

// sqsRefusals are what SQS answers a send it refuses for its body: over
// the queue's size, or a character it takes not (sqsmem says the same).
var sqsRefusals = []string{"Message must be shorter than", "Invalid characters found"}

// sizeWatch is the handlers' logger's handler, around the run's own: it
// notes the sends SQS refused (sqsRefusals, in any line) and the calls
// given back because their key's line was full ("call waits", a debug
// line the run's log leaves out), by key.
type sizeWatch struct {
	slog.Handler
	*watched
}

// watched is what a sizeWatch noted.
type watched struct {
	mu      sync.Mutex
	refused []string       // the first sends SQS refused, their errors
	full    map[string]int // calls given back for a full line, by key as logged
	inLine  int            // calls given back to wait in their key's line
}

func newSizeWatch(next slog.Handler) sizeWatch {
	return sizeWatch{Handler: next, watched: &watched{full: map[string]int{}}}
}

// Enabled takes every line: the debug ones are read, not written.
func (h sizeWatch) Enabled(context.Context, slog.Level) bool { return true }

// Handle notes what the line says, and writes it if the run's log takes it.
func (h sizeWatch) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.String()
		switch {
		case r.Message == "call waits" && a.Key == "why" && strings.Contains(v, lineFull):
			h.noteFull(v)
		case r.Message == "call waits" && a.Key == "why" && strings.Contains(v, " in line)"):
			h.noteInLine()
		case slices.ContainsFunc(sqsRefusals, func(s string) bool { return strings.Contains(v, s) }):
			h.noteRefused(r.Message + ": " + v)
		}
		return true
	})
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps watching.
func (h sizeWatch) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sizeWatch{Handler: h.Handler.WithAttrs(attrs), watched: h.watched}
}

// WithGroup keeps watching.
func (h sizeWatch) WithGroup(name string) slog.Handler {
	return sizeWatch{Handler: h.Handler.WithGroup(name), watched: h.watched}
}

// lineFull is how an Agent says why a call waits with no place in its
// key's line (agent.holdSlot): the line is full, or the call's request
// too large to queue.
const lineFull = "(its line is full)"

// fullKey reads the key out of a lineFull reason.
var fullKey = regexp.MustCompile(`key ("(?:[^"\\]|\\.)*") \(its line is full\)`)

func (w *watched) noteFull(why string) {
	key := why
	if m := fullKey.FindStringSubmatch(why); m != nil {
		if k, err := strconv.Unquote(m[1]); err == nil {
			key = k
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.full[key]++
}

func (w *watched) noteInLine() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inLine++
}

func (w *watched) noteRefused(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.refused) < 5 {
		w.refused = append(w.refused, clip(what, 300))
	}
}

// fullLines are the calls given back for a full line, by key.
func (w *watched) fullLines() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.full)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// checkSizes finds what the run sent or kept past a limit: a message
// delivered over SQS's 256 KiB, a send SQS refused, an item over
// DynamoDB's 400 KB (OverLimit); a message refused to a DLQ for its size
// or its encoding, or left in the DLQ of a queue no outside sender writes
// to, any but the outside ones (Refused): the run's payloads are within
// every limit, and bad input is refused for what it means, never for its
// size or its characters.
func (r *Result) checkSizes(w *watched, outside map[string]bool) {
	v := &r.Violations
	if r.LargestMessage > offload.MaxMessageBytes {
		v.OverLimit = append(v.OverLimit, fmt.Sprintf("a message of %d bytes delivered, over SQS's %d", r.LargestMessage, offload.MaxMessageBytes))
	}
	if r.LargestItem > maxItemBytes {
		v.OverLimit = append(v.OverLimit, fmt.Sprintf("an item of %d bytes, over DynamoDB's %d", r.LargestItem, maxItemBytes))
	}
	w.mu.Lock()
	for _, s := range w.refused {
		v.OverLimit = append(v.OverLimit, "a send SQS refused: "+s)
	}
	w.mu.Unlock()
	for _, q := range slices.Sorted(maps.Keys(r.DeadLetters)) {
		if !outside[q] {
			v.Refused = append(v.Refused, fmt.Sprintf("%d messages in %s", r.DeadLetters[q], q))
		}
	}
	for _, why := range slices.Sorted(maps.Keys(r.Rejected)) {
		if forSize(why) {
			v.Refused = append(v.Refused, fmt.Sprintf("%d rejected as %q", r.Rejected[why], why))
		}
	}
}

// forSize reports whether a rejection's reason is about a message's size
// or its encoding, not what it means.
func forSize(why string) bool {
	switch {
	case strings.Contains(why, "bytes, over"), strings.Contains(why, "UTF-8"), strings.Contains(why, "nvalid character"):
		return true
	}
	return strings.Contains(why, "bad JSON") && !strings.Contains(why, "duplicate object member name")
}

// checkLines finds the flow orders' calls given back for a full line
// while their key's line could not have been full: the run's keys have at
// most a few hundred calls each, well within a line's bounds
// (keyline.MaxWaiters, keyline.MaxLineBytes), so a call refused its place there
// was refused for its request's size (LinesRefused).
func (f *flowRun) checkLines(ctx context.Context, r *Result, w *watched) {
	orders := map[string]int{} // by customer
	f.mu.Lock()
	for _, id := range f.sent {
		orders[f.plan.customerOf(id)]++
	}
	f.mu.Unlock()
	calls := map[string]int{} // orders of each key, as the Agents name it
	for c, n := range orders {
		for _, a := range f.plan.keyed() {
			if name, err := f.keyName(ctx, a, c); err == nil {
				calls[name] = max(calls[name], n)
			}
		}
	}
	full := w.fullLines()
	r.Violations.LinesRefused = linesRefused(full, calls)
	if r.Flow != nil {
		w.mu.Lock()
		r.Flow.InLine = w.inLine
		w.mu.Unlock()
		for _, n := range full {
			r.Flow.LineFull += n
		}
	}
}

// linesRefused are the keys whose calls were given back for a full line
// (full: how many, by key) though the key had at most maxShortLine orders
// (calls: by key).
func linesRefused(full, calls map[string]int) []string {
	var out []string
	for key, n := range full {
		if calls[key] <= maxShortLine {
			out = append(out, fmt.Sprintf("%d calls of key %q (of %d orders) given back %s", n, clip(key, 80), calls[key], lineFull))
		}
	}
	slices.Sort(out)
	return out
}

// maxShortLine is the most orders a key may have for its line never to be
// full: a hundred calls of 2 KiB requests are under keyline.MaxLineBytes.
const maxShortLine = 100

// HostileFigures are what a run sent of the hostile alphabet (Plan.Hostile).
type HostileFigures struct {
	Documents map[string]int `json:"documents"`           // hostile large orders, by size class
	Approvals map[string]int `json:"approvals"`           // orders sent hostile approvals, by size class
	Keys      int            `json:"keys"`                // hostile keys of calls in flight (flow customers)
	NotJSON   int            `json:"answersNotJson"`      // services' answers that were not JSON
	AtLimit   int            `json:"documentsAtTheLimit"` // orders at the limits, hostile
}

// hostileFigures counts what the plan made hostile among ids.
func (p Plan) hostileFigures(ids []string, notJSON int) *HostileFigures {
	if p.Hostile <= 0 {
		return nil
	}
	h := &HostileFigures{Documents: map[string]int{}, Approvals: map[string]int{}, NotJSON: notJSON, AtLimit: len(p.limits)}
	keys := map[string]bool{}
	for _, id := range ids {
		if c, ok := p.hostiles[id]; ok {
			h.Documents[documentClasses[c].name]++
		}
		if p.waits(id) && p.fateOf(id) != fateNone && p.approvalHostile(id) {
			h.Approvals[p.approvalClass(id).name]++
		}
		if c := p.customerOf(id); p.flowOrder(id) && len(c) >= keyBytes[0] { // a plain one is shorter
			keys[c] = true
		}
	}
	h.Keys = len(keys)
	return h
}

// print writes the figures as rows of the run's table (nothing for a run
// without hostile payloads).
func (h *HostileFigures) print(row func(k string, v any)) {
	if h == nil {
		return
	}
	for _, c := range documentClasses {
		if n := h.Documents[c.name]; n > 0 {
			row("hostile large orders "+c.name, n)
		}
	}
	for _, c := range approvalClasses {
		if n := h.Approvals[c.name]; n > 0 {
			row("hostile approvals "+c.name, n)
		}
	}
	row("hostile orders at the limits", h.AtLimit)
	row("hostile keys of calls in flight (141 to 400 bytes)", h.Keys)
	row("answers not JSON (XML, control bytes, invalid UTF-8)", h.NotJSON)
}
