package console

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/operator"
)

// waterfall is an order's records on one time axis, from the order's
// creation to its end (or now): each record a row, its wait for a claim,
// its attempt and its wait for an event, a time or a callback as bars, and
// the marks of its history (claims, recoveries, give-backs) as ticks.
type waterfall struct {
	W, H   int
	Rows   []fallRow
	Axis   []fallTick // the time axis's labels
	Span   string     // the order's span, in words
	LabelW int
}

// fallRow is one record's row.
type fallRow struct {
	Name  string
	Y     int
	Bars  []fallBar
	Ticks []fallTick
}

// fallBar is a span of a record's life: "queue" (ready, not claimed), "run"
// (its attempt), "wait" (an event, a timer, a callback).
type fallBar struct {
	X, W  int
	Class string
	Title string
}

// fallTick is a point in time: a history mark on a row, or an axis label.
type fallTick struct {
	X     int
	Title string
}

const (
	fallLabelW = 190
	fallAxisW  = 760
	fallRowH   = 22
)

// waterfallOf lays out st's records, as of now.
func waterfallOf(st operator.Status, now time.Time) waterfall {
	start := st.Order.CreatedAt
	end := st.Order.CompletedAt
	if end.IsZero() {
		end = now
	}
	for _, r := range st.Records {
		for _, t := range []time.Time{r.DoneAt, r.ClaimedAt, r.ReadyAt} {
			if t.After(end) {
				end = t
			}
		}
	}
	span := max(end.Sub(start), time.Millisecond)
	x := func(t time.Time) int {
		if t.Before(start) {
			t = start
		}
		return fallLabelW + int(float64(fallAxisW)*float64(t.Sub(start))/float64(span))
	}
	bar := func(class string, from, to time.Time, what string) fallBar {
		x1, x2 := x(from), x(to)
		return fallBar{X: x1, W: max(x2-x1, 2), Class: class,
			Title: fmt.Sprintf("%s: %s → %s (%s)", what, clockOf(from), clockOf(to), to.Sub(from).Round(time.Millisecond))}
	}
	w := waterfall{W: fallLabelW + fallAxisW + 20, LabelW: fallLabelW, Span: span.Round(time.Millisecond).String()}
	history := map[string][]operator.Event{}
	for _, e := range st.Timeline {
		history[e.Record] = append(history[e.Record], e)
	}
	for _, r := range st.Records {
		if r.ReadyAt.IsZero() && r.ClaimedAt.IsZero() && r.DoneAt.IsZero() && r.Waiting == nil {
			continue // never made ready: nothing to draw
		}
		row := fallRow{Name: r.Name, Y: 24 + len(w.Rows)*fallRowH}
		done := r.DoneAt
		if done.IsZero() {
			done = end
		}
		switch {
		case r.Kind != "agent": // a wait or a timer: ready, then waiting until done
			since := r.ReadyAt
			if r.Waiting != nil {
				since = r.Waiting.Since
			}
			row.Bars = append(row.Bars, bar("wait", since, done, r.KindText()))
		default:
			if !r.ReadyAt.IsZero() {
				claimed := r.ClaimedAt
				if claimed.IsZero() || claimed.Before(r.ReadyAt) {
					claimed = done // never claimed since it was ready (or ready again since)
				}
				row.Bars = append(row.Bars, bar("queue", r.ReadyAt, claimed, "ready, waiting for its claim"))
			}
			if !r.ClaimedAt.IsZero() && !r.ClaimedAt.After(done) {
				class := "run"
				if r.Waiting != nil && r.Waiting.For == "callback" {
					class = "wait"
				}
				row.Bars = append(row.Bars, bar(class, r.ClaimedAt, done, fmt.Sprintf("attempt %d", r.Attempt)))
			}
		}
		for _, e := range history[r.Name] {
			row.Ticks = append(row.Ticks, fallTick{X: x(e.At), Title: clockOf(e.At) + " " + e.What})
		}
		w.Rows = append(w.Rows, row)
	}
	for i := range 5 {
		t := start.Add(span * time.Duration(i) / 4)
		w.Axis = append(w.Axis, fallTick{X: x(t), Title: "+" + t.Sub(start).Round(time.Millisecond).String()})
	}
	w.H = 24 + len(w.Rows)*fallRowH + 8
	return w
}

// clockOf is a time of day with milliseconds.
func clockOf(t time.Time) string { return t.UTC().Format("15:04:05.000") }
