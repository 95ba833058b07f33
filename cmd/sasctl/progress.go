package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/metrics"
)

// progress shows how far the demo batch got: a redrawn bar on a terminal, a
// line every two seconds otherwise.
type progress struct {
	out  io.Writer
	tty  bool
	last time.Time
	line string
}

func newProgress(out io.Writer, tty bool) *progress { return &progress{out: out, tty: tty} }

func (p *progress) show(elapsed time.Duration, c localrun.Counts, t *metrics.Tally) {
	const width = 30
	filled := width * c.Ended() / max(c.Total, 1)
	p.line = fmt.Sprintf("[%s%s] %5.1fs %d/%d ended: %d processed, %d failed, %d in flight | retries %d, recoveries %d, alerts %d",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), elapsed.Seconds(), c.Ended(), c.Total,
		c.Processed, c.Failed+c.CompensationFailed, c.Total-c.Ended(), int(t.Sum(metrics.AgentRetries)),
		int(t.Sum(metrics.SupervisorRecoveries)), int(t.Sum(metrics.AlertsPublished)))
	switch {
	case p.tty:
		fmt.Fprintf(p.out, "\r\033[K%s", p.line)
	case time.Since(p.last) >= 2*time.Second:
		fmt.Fprintln(p.out, p.line)
		p.last = time.Now()
	}
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.out)
	} else if p.line != "" {
		fmt.Fprintln(p.out, p.line)
	}
}

// remotesimShuffle returns a seeded shuffle, so a demo run is repeatable.
func remotesimShuffle(seed uint64) func([]string) {
	r := rand.New(rand.NewPCG(seed, 42))
	return func(s []string) { r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] }) }
}
