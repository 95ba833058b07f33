package costbench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// LogUse is what a function wrote to CloudWatch Logs, per order: each line
// of its output is a log event, ingested (and billed) by its bytes.
type LogUse struct {
	Lines       float64 `json:"lines"`       // its own log lines (slog, JSON)
	Bytes       float64 `json:"bytes"`       // their bytes
	MetricLines float64 `json:"metricLines"` // its EMF documents
	MetricBytes float64 `json:"metricBytes"`
	// PlatformBytes are Lambda's own lines, START, END and REPORT, one of
	// each per invocation (platformLineBytes).
	PlatformBytes float64 `json:"platformBytes"`
}

// Total is every byte ingested.
func (u LogUse) Total() float64 { return u.Bytes + u.MetricBytes + u.PlatformBytes }

func (u *LogUse) add(o LogUse) {
	u.Lines += o.Lines
	u.Bytes += o.Bytes
	u.MetricLines += o.MetricLines
	u.MetricBytes += o.MetricBytes
	u.PlatformBytes += o.PlatformBytes
}

func (u LogUse) per(n float64) LogUse {
	return LogUse{Lines: u.Lines / n, Bytes: u.Bytes / n, MetricLines: u.MetricLines / n, MetricBytes: u.MetricBytes / n,
		PlatformBytes: u.PlatformBytes / n}
}

// asLambdaWrites is what a function that wrote u locally in invocations
// invocations of memoryMB would write in Lambda: Lambda's lines for each
// invocation, and an EMF document for each. Locally, invocations that run
// at once share a handler, and so a document: their bytes are scaled to a
// document an invocation, each of the mean size (an upper bound: a shared
// document holds more values).
func asLambdaWrites(u LogUse, invocations, memoryMB int) LogUse {
	if n := float64(invocations); u.MetricLines > 0 && u.MetricLines < n {
		u.MetricBytes *= n / u.MetricLines
		u.MetricLines = n
	}
	u.PlatformBytes = float64(invocations * platformLineBytes(memoryMB))
	return u
}

// platformLineBytes is the size of the lines Lambda writes for every
// invocation of a function of memoryMB, in the text format the stack's
// functions use (the format of AWS's Lambda developer guide, "Log and monitor
// Go Lambda functions"), with a request id of 36 characters and
// two-digit durations; an invocation that starts an environment adds an
// "Init Duration" (not counted).
func platformLineBytes(memoryMB int) int {
	const id = "8f507cfc-a3c7-4697-b07a-ac58fc914c95"
	lines := []string{
		"START RequestId: " + id + " Version: $LATEST\n",
		"END RequestId: " + id + "\n",
		fmt.Sprintf("REPORT RequestId: %s\tDuration: 12.34 ms\tBilled Duration: 13 ms\tMemory Size: %d MB\tMax Memory Used: 31 MB\t\n",
			id, memoryMB),
	}
	return len(strings.Join(lines, ""))
}

// logMeter is the handlers' stdout and stderr as a deployed function's:
// it counts each line's bytes under the function that wrote it (the
// "function" of a log line, the "Function" of an EMF document). Safe for
// concurrent use; every writer writes whole lines.
type logMeter struct {
	mu sync.Mutex
	by map[string]*LogUse
}

func newLogMeter() *logMeter { return &logMeter{by: map[string]*LogUse{}} }

// logger is the handlers' logger as deployment.FromLambdaEnv builds it in
// a function: JSON lines at the default level, Info.
func (m *logMeter) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(m, nil)) }

// Write counts the lines of p.
func (m *logMeter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) > 0 {
			m.count(line)
		}
	}
	return len(p), nil
}

func (m *logMeter) count(line []byte) {
	var doc struct {
		AWS      json.RawMessage `json:"_aws"`
		Function string          `json:"Function"`
		Fn       string          `json:"function"`
	}
	_ = json.Unmarshal(line, &doc)
	fn := cmp.Or(doc.Function, doc.Fn, "other")
	u := m.by[fn]
	if u == nil {
		u = &LogUse{}
		m.by[fn] = u
	}
	if doc.AWS != nil {
		u.MetricLines++
		u.MetricBytes += float64(len(line))
	} else {
		u.Lines++
		u.Bytes += float64(len(line))
	}
}

// snapshot returns what each function wrote.
func (m *logMeter) snapshot() map[string]LogUse {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]LogUse, len(m.by))
	for fn, u := range m.by {
		out[fn] = *u
	}
	return out
}
