package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// ProcUse is what the processes of one kind took: their CPU seconds over a
// measure, and the peak of their memory (the sum of their proportional set
// sizes, PSS, sampled: memory they share, as PostgreSQL's backends share its
// buffers, counts once).
type ProcUse struct {
	Name       string  `json:"name"`
	Count      int     `json:"count"`
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakMB     float64 `json:"peakMB"`
}

// Meter measures the CPU and memory of this process and every process
// under it, by kind (this process, DynamoDB Local, PostgreSQL...).
type Meter struct {
	self  string
	from  map[int32]float64 // CPU seconds of each process at the start
	mu    sync.Mutex
	kinds map[int32]string // each process's kind, once looked up
	peak  map[string]float64
	count map[string]int
	total float64 // the peak of the sum over every kind, MB
	stop  chan struct{}
	done  chan struct{}
}

// StartMeter starts measuring: the CPU from now, the memory sampled every
// 250 ms until Stop. self names this process.
func StartMeter(self string) *Meter {
	m := &Meter{self: self, from: map[int32]float64{}, kinds: map[int32]string{}, peak: map[string]float64{},
		count: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, pid := range treePIDs() {
		m.from[pid] = cpuSeconds(pid)
	}
	go m.sample()
	return m
}

func (m *Meter) sample() {
	defer close(m.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		m.sampleOnce()
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

// sampleOnce adds up each kind's PSS now and keeps the peaks.
func (m *Meter) sampleOnce() {
	now := map[string]float64{}
	total := 0.0
	for _, pid := range treePIDs() {
		mb := pssMB(pid)
		now[m.kind(pid)] += mb
		total += mb
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range now {
		m.peak[k] = max(m.peak[k], v)
	}
	m.total = max(m.total, total)
}

// Stop ends the measure: the CPU seconds each kind took since the start
// (this process first, then by the most) and the peaks of its memory; and
// the peak of all of them together.
func (m *Meter) Stop() (uses []ProcUse, peakMB float64) {
	close(m.stop)
	<-m.done
	m.sampleOnce()
	byKind := map[string]*ProcUse{}
	var order []string
	for _, pid := range treePIDs() {
		k := m.kind(pid)
		u := byKind[k]
		if u == nil {
			u = &ProcUse{Name: k}
			byKind[k] = u
			order = append(order, k)
		}
		u.Count++
		u.CPUSeconds += cpuSeconds(pid) - m.from[pid]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range order {
		byKind[k].PeakMB = m.peak[k]
		uses = append(uses, *byKind[k])
	}
	slices.SortStableFunc(uses[1:], func(a, b ProcUse) int { return int(1000 * (b.CPUSeconds - a.CPUSeconds)) })
	return uses, m.total
}

// kind names a process by what it runs: this one is self.
func (m *Meter) kind(pid int32) string {
	m.mu.Lock()
	k, ok := m.kinds[pid]
	m.mu.Unlock()
	if ok {
		return k
	}
	k = m.self
	if pid != int32(os.Getpid()) {
		k = kindOf(pid)
	}
	m.mu.Lock()
	m.kinds[pid] = k
	m.mu.Unlock()
	return k
}

// kindOf names a child process by what it runs.
func kindOf(pid int32) string {
	p, err := process.NewProcess(pid)
	if err != nil {
		return "?"
	}
	cmdline, _ := p.Cmdline()
	name, _ := p.Name()
	switch {
	case strings.Contains(cmdline, "DynamoDBLocal"):
		return "DynamoDB Local"
	case strings.HasPrefix(name, "postgres"), strings.HasPrefix(cmdline, "postgres:"):
		return "PostgreSQL"
	case strings.Contains(cmdline, "moto"):
		return "moto"
	}
	return name
}

// treePIDs are this process and every process under it, read from /proc
// once.
func treePIDs() []int32 {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int32][]int32{}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // it ended
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses
		end := bytes.LastIndexByte(b, ')')
		pid, err1 := strconv.Atoi(string(bytes.Fields(b[:end])[0]))
		fields := bytes.Fields(b[end+1:])
		if err1 != nil || len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(string(fields[1]))
		if err == nil {
			children[int32(ppid)] = append(children[int32(ppid)], int32(pid))
		}
	}
	out := []int32{int32(os.Getpid())}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// cpuSeconds is a process's user and system CPU seconds (0 once it ended).
func cpuSeconds(pid int32) float64 {
	p, err := process.NewProcess(pid)
	if err != nil {
		return 0
	}
	t, err := p.Times()
	if err != nil {
		return 0
	}
	return t.User + t.System
}

// pssMB is a process's proportional set size, in MB (0 if unreadable).
func pssMB(pid int32) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "Pss:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// Restart starts the CPU's measure again from now (the memory's peaks
// stay).
func (m *Meter) Restart() {
	from := map[int32]float64{}
	for _, pid := range treePIDs() {
		from[pid] = cpuSeconds(pid)
	}
	m.from = from
}
