package capacity

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// BurstReport is what a burst of orders meets: B orders over D on top of a
// steady rate.
type BurstReport struct {
	Orders int           `json:"orders"`
	Over   time.Duration `json:"-"`
	Rate   float64       `json:"baseRatePerSecond"`
	// Arrival is the orders a second while the burst lasts; Drain what the
	// pipeline takes at most, bound by the Bottleneck: the event source
	// mapping with the lowest ceiling (its queue holds the backlog).
	Arrival    float64 `json:"arrivalPerSecond"`
	Drain      float64 `json:"drainPerSecond"`
	Bottleneck string  `json:"bottleneck"`
	// Backlog is the orders waiting when the burst ends; Drains whether
	// they ever drain (the steady rate is below Drain), and DrainTime how
	// long from the burst's start until they have.
	Backlog   float64       `json:"backlog"`
	Drains    bool          `json:"drains"`
	DrainTime time.Duration `json:"-"`
	// MaxWait is the queue wait the burst's last order sees at the
	// bottleneck, MeanWait its orders' mean; Alarm is the alarm that sees
	// it, and Alarmed whether MaxWait passes its threshold.
	MaxWait  time.Duration `json:"-"`
	MeanWait time.Duration `json:"-"`
	Alarm    string        `json:"alarm"`
	Alarmed  bool          `json:"alarmed"`
	// LooksPerOrder are the Supervisor's looks at a waiting order (none
	// while it waits to be stored), and AtDrain every limit's use while the
	// burst goes through, at its arrival rate or the Drain rate if lower,
	// with those looks: a limit over its Max there throttles, and a
	// throttled write is retried, up to the queue's receive count.
	LooksPerOrder float64 `json:"looksPerOrder"`
	AtDrain       Report  `json:"atDrain"`
}

// MarshalJSON writes the report with its durations as Go durations in a
// string ("1s", "52.5s"), as every sasctl JSON output has them.
func (b BurstReport) MarshalJSON() ([]byte, error) {
	type plain BurstReport
	return json.Marshal(struct {
		plain
		Over      string `json:"over"`
		DrainTime string `json:"drainTime"`
		MaxWait   string `json:"maxWait"`
		MeanWait  string `json:"meanWait"`
	}{plain(b), b.Over.String(), b.DrainTime.String(), b.MaxWait.String(), b.MeanWait.String()})
}

// Burst says what orders orders arriving over the duration over meet, on
// top of rate orders a second.
func (m Model) Burst(orders int, over time.Duration, rate float64) (BurstReport, error) {
	if orders < 1 || over <= 0 {
		return BurstReport{}, fmt.Errorf("capacity: a burst of %d orders over %s", orders, over)
	}
	steady, err := m.At(rate)
	if err != nil {
		return BurstReport{}, err
	}
	r := BurstReport{Orders: orders, Over: over, Rate: rate, Arrival: rate + float64(orders)/over.Seconds()}
	first := m.bottleneck(steady)
	r.Drain, r.Bottleneck = first.Ceiling, first.Name
	r.Backlog = math.Max(r.Arrival-r.Drain, 0) * over.Seconds()
	r.Drains = r.Backlog == 0 || r.Drain > rate
	r.DrainTime = over
	if r.Backlog > 0 && r.Drains {
		r.DrainTime += seconds(r.Backlog / (r.Drain - rate))
	}
	if r.Backlog > 0 {
		r.MaxWait = seconds(r.Backlog / r.Drain)
		r.MeanWait = r.MaxWait / 2
	}
	r.Alarm, r.Alarmed = m.alarm(first, r.MaxWait)
	if first.Name != m.submissionName() {
		r.LooksPerOrder = m.looksWaiting(r.MaxWait)
	}
	waiting := m
	waiting.Workload.Looks += r.LooksPerOrder
	if r.AtDrain, err = waiting.At(math.Min(r.Arrival, r.Drain)); err != nil {
		return r, err
	}
	return r, nil
}

// bottleneck is the event source mapping with the lowest ceiling.
func (m Model) bottleneck(rep Report) Limit {
	var b Limit
	for _, l := range rep.Limits {
		if l.Unit == "instances" && l.Ceiling > 0 && !isAccount(l) && (b.Ceiling == 0 || l.Ceiling < b.Ceiling) {
			b = l
		}
	}
	return b
}

func isAccount(l Limit) bool { return l.Name == "Lambda concurrency, the account's" }

// submissionName is the name of Submission's mapping's limit.
func (m Model) submissionName() string {
	return fmt.Sprintf("%s concurrency, on the %s queue", Submission, "orders")
}

// alarm is the alarm that sees a wait at the bottleneck: an order waiting to
// be stored is the orders queue's oldest message (its alarm fires at 5
// minutes); a stored one's step is a queue wait.
func (m Model) alarm(bottleneck Limit, wait time.Duration) (string, bool) {
	if bottleneck.Name == m.submissionName() {
		return "the orders queue's oldest-message alarm", wait >= 5*time.Minute
	}
	return "QueueWaitAlarm", wait >= m.Settings.QueueWaitAlarm
}

// looksWaiting is the Supervisor's mean looks at an order whose wait is
// spread evenly from none to most: a look at FirstLook, then at the pickup
// timeout, twice it, four times… (each one later than the first).
func (m Model) looksWaiting(most time.Duration) float64 {
	const steps = 1000
	sum := 0.0
	for i := range steps {
		sum += float64(m.looks(time.Duration(float64(most) * (float64(i) + 0.5) / steps)))
	}
	return sum / steps
}

// looks is the Supervisor's looks at an order that waited w.
func (m Model) looks(w time.Duration) int {
	s := m.Settings
	if w < s.FirstLook {
		return 0
	}
	n := 1
	for at := s.PickupTimeout; at <= w; at *= 2 {
		if at > s.FirstLook {
			n++
		}
	}
	return n
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
