package handlerbench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// The units of a handler's throughput, as its benchmark reports them and
// ReadFigures reads them back. For the Supervisor a message is an order
// looked at.
const (
	UnitMsgsPerSecond = "msgs/s"   // messages one instance handles a second, one invocation at a time
	UnitMsPerMsg      = "ms/msg"   // handler time per message
	UnitGBsPerMsg     = "GB-s/msg" // billed duration × memory, per message
)

// Figures are one handler's throughput per instance.
type Figures struct {
	MsgsPerSecond   float64 `json:"msgsPerSecond"`
	MsPerMsg        float64 `json:"msPerMsg"`
	GBSecondsPerMsg float64 `json:"gbSecondsPerMsg"`
}

// Report reports b's throughput: msgs messages handled in its elapsed time
// by one instance of a function of memoryMB.
func Report(b *testing.B, msgs, memoryMB int) {
	b.Helper()
	sec := b.Elapsed().Seconds()
	if msgs == 0 || sec == 0 {
		return
	}
	b.ReportMetric(float64(msgs)/sec, UnitMsgsPerSecond)
	b.ReportMetric(1000*sec/float64(msgs), UnitMsPerMsg)
	b.ReportMetric(sec/float64(msgs)*float64(memoryMB)/1024, UnitGBsPerMsg)
}

// ReadFigures reads the output of `go test -bench Throughput`: the
// figures of each sub-benchmark that reports them, by its name (the
// handler's: "submission", "agent", "scheduler", "supervisor"), the mean of
// its lines if it ran more than once.
func ReadFigures(r io.Reader) (map[string]Figures, error) {
	sums, counts := map[string]Figures{}, map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, f, ok, err := parseLine(sc.Text())
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		s := sums[name]
		s.MsgsPerSecond += f.MsgsPerSecond
		s.MsPerMsg += f.MsPerMsg
		s.GBSecondsPerMsg += f.GBSecondsPerMsg
		sums[name], counts[name] = s, counts[name]+1
	}
	out := map[string]Figures{}
	for name, s := range sums {
		n := counts[name]
		out[name] = Figures{MsgsPerSecond: s.MsgsPerSecond / n, MsPerMsg: s.MsPerMsg / n, GBSecondsPerMsg: s.GBSecondsPerMsg / n}
	}
	return out, sc.Err()
}

// parseLine reads a benchmark result line ("BenchmarkX/name-2  N  v unit
// v unit…"); ok is false for any other line, or one without throughput.
func parseLine(line string) (name string, f Figures, ok bool, err error) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") || len(fields)%2 != 0 {
		return "", f, false, nil
	}
	name = fields[0][strings.LastIndex(fields[0], "/")+1:]
	if i := strings.LastIndex(name, "-"); i > 0 {
		name = name[:i] // the GOMAXPROCS suffix
	}
	for i := 2; i+1 < len(fields); i += 2 {
		v, perr := strconv.ParseFloat(fields[i], 64)
		if perr != nil {
			return "", f, false, fmt.Errorf("benchmark line %q: %w", line, perr)
		}
		switch fields[i+1] {
		case UnitMsgsPerSecond:
			f.MsgsPerSecond, ok = v, true
		case UnitMsPerMsg:
			f.MsPerMsg = v
		case UnitGBsPerMsg:
			f.GBSecondsPerMsg = v
		}
	}
	return name, f, ok, nil
}
