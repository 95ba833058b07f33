package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// WorkflowHealth is one workflow version's health: its orders over the
// last hour and day (from the hourly counts the ending writes keep, see
// statestore.Store.Health), and its orders in flight now, by what they
// wait on. What the console's health page and sasctl top show.
type WorkflowHealth struct {
	Workflow string  `json:"workflow"`
	Version  string  `json:"version"`
	Hour     Figures `json:"hour"`
	Day      Figures `json:"day"`
	InFlight int     `json:"inFlight"`
	// Waiting counts the orders in flight by what they wait on
	// (WaitReason): "at work" (a step ready or running), "event: <name>",
	// "timer", "callback" (an async call's service), "held: <cause>" (for
	// their operator), "flow: <class>" (their agent's flow control: pause,
	// line, rate, 503), "undoing".
	Waiting map[string]int `json:"waiting"`
}

// Figures are a workflow version's orders over a window.
type Figures struct {
	// Since is the window's first clock hour (UTC): the hour's window is
	// the previous clock hour and this one, the day's the last 24 and this.
	Since time.Time `json:"since"`
	// Started are the orders stored in the window: ended since, or in
	// flight.
	Started int64                    `json:"started"`
	Ended   map[workflow.State]int64 `json:"ended"`
	// FailureRate is the ended orders that ended Failed or
	// CompensationFailed, CompensationRate those whose undo actions ran,
	// as fractions of the ended ones.
	FailureRate      float64       `json:"failureRate"`
	CompensationRate float64       `json:"compensationRate"`
	Order            Percentiles   `json:"order"`
	Steps            []StepFigures `json:"steps"`
}

// Percentiles of durations, each the bound of the latency bucket the rank
// falls in (health.Bounds).
type Percentiles struct {
	Count int64      `json:"count"`
	P50   Percentile `json:"p50"`
	P95   Percentile `json:"p95"`
	P99   Percentile `json:"p99"`
}

// Percentile is a percentile's bucket bound; negative past the last bound
// (in JSON: ">24h").
type Percentile time.Duration

// MarshalJSON writes the bound as a duration's text, or ">24h".
func (p Percentile) MarshalJSON() ([]byte, error) {
	if p < 0 {
		return []byte(`">24h"`), nil
	}
	return Duration(p).MarshalJSON()
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Percentile) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("percentile: %w", err)
	}
	if s == ">24h" {
		*p = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("percentile: %w", err)
	}
	*p = Percentile(d)
	return nil
}

// StepFigures are one step's durations (made ready to done).
type StepFigures struct {
	Name string `json:"name"`
	Percentiles
}

// MaxHealthInFlight bounds the orders in flight a health view reads: past
// it, the in-flight counts are of the first ones read.
const MaxHealthInFlight = 20_000

// Health is every workflow version's health at now: the hourly counts of
// the last day (at most 25×statestore.HealthShards small queries) and the
// orders in flight (the deadline index, at most MaxHealthInFlight).
func (o *Operator) Health(ctx context.Context, now time.Time) ([]WorkflowHealth, error) {
	hourSince, daySince := health.Hour(now.Add(-time.Hour)), health.Hour(now.Add(-24*time.Hour))
	hours, err := o.Store.Health(ctx, daySince, now)
	if err != nil {
		return nil, err
	}
	by := map[string]*WorkflowHealth{}
	get := func(wf, version string) *WorkflowHealth {
		k := wf + "@" + version
		if by[k] == nil {
			by[k] = &WorkflowHealth{Workflow: wf, Version: version, Waiting: map[string]int{},
				Hour: emptyFigures(hourSince), Day: emptyFigures(daySince)}
		}
		return by[k]
	}
	for _, w := range health.Sum(hours, hourSince) {
		get(w.Workflow, w.Version).Hour = figuresOf(w)
	}
	for _, w := range health.Sum(hours, daySince) {
		get(w.Workflow, w.Version).Day = figuresOf(w)
	}
	var holdErr error
	holds := o.agentHolds(ctx, now, &holdErr)
	err = o.eachInFlight(ctx, MaxHealthInFlight, func(t statestore.Task) {
		h := get(t.Workflow, t.Version)
		h.InFlight++
		h.Waiting[WaitReason(t, holds)]++
		if !t.CreatedAt.Before(hourSince) {
			h.Hour.Started++
		}
		if !t.CreatedAt.Before(daySince) {
			h.Day.Started++
		}
	})
	out := make([]WorkflowHealth, 0, len(by))
	for _, h := range by {
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b WorkflowHealth) int {
		return strings.Compare(a.Workflow+"\x00"+a.Version, b.Workflow+"\x00"+b.Version)
	})
	return out, errors.Join(err, holdErr)
}
