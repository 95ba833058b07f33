package metrics

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// Tally is a writer that reads EMF lines back and sums each metric, the way
// CloudWatch would (each value of a document's array counts): the local
// runner's summary and the tests read it. Lines that are not EMF are
// ignored. Safe for concurrent use.
type Tally struct {
	mu      sync.Mutex
	partial []byte
	sums    map[string]float64
	maxes   map[string]float64
	lines   []map[string]any
}

// NewTally returns an empty tally.
func NewTally() *Tally { return &Tally{sums: map[string]float64{}, maxes: map[string]float64{}} }

// Write consumes EMF lines.
func (t *Tally) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		t.add(t.partial[:i])
		t.partial = t.partial[i+1:]
	}
}

func (t *Tally) add(line []byte) {
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return
	}
	aws, _ := m["_aws"].(map[string]any)
	dirs, _ := aws["CloudWatchMetrics"].([]any)
	for _, d := range dirs {
		dm, _ := d.(map[string]any)
		ms, _ := dm["Metrics"].([]any)
		for _, x := range ms {
			name, _ := x.(map[string]any)["Name"].(string)
			for _, v := range Values(m[name]) {
				t.sums[name] += v
				t.maxes[name] = max(t.maxes[name], v)
			}
		}
	}
	t.lines = append(t.lines, m)
}

// Values are a metric's values in an EMF document as decoded from JSON (a
// member's value): a number, or an array of them.
func Values(v any) []float64 {
	switch v := v.(type) {
	case float64:
		return []float64{v}
	case []any:
		out := make([]float64, 0, len(v))
		for _, x := range v {
			if f, ok := x.(float64); ok {
				out = append(out, f)
			}
		}
		return out
	}
	return nil
}

// Sum is the total of the named metric so far.
func (t *Tally) Sum(name string) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sums[name]
}

// Max is the largest value of the named metric so far (0 if none).
func (t *Tally) Max(name string) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxes[name]
}

// Lines returns the EMF lines that emitted the named metric.
func (t *Tally) Lines(name string) []map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []map[string]any
	for _, l := range t.lines {
		if _, ok := l[name]; ok {
			out = append(out, l)
		}
	}
	return out
}

// Locked returns a writer that serializes writes to w: for a writer shared by
// several emitters and loggers that is not safe for concurrent use itself.
func Locked(w io.Writer) io.Writer { return &lockedWriter{w: w} }

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
