package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/shirou/gopsutil/v4/process"
)

// cpuMeter measures the CPU time a local run takes, split between this
// process (the handlers, the local runner, the in-process queues and the
// simulator: the product's own cost) and each emulator it started (its
// child processes: moto_server, DynamoDB Local), so that a run says where
// its time went.
type cpuMeter struct {
	from map[int32]float64 // CPU seconds of each process at the start
}

// cpuUse is one process's CPU seconds over the measure.
type cpuUse struct {
	name    string
	seconds float64
}

// startCPU starts the measure (nothing on a system whose processes cannot
// be read: the figures are then left out).
func startCPU() *cpuMeter {
	m := &cpuMeter{from: map[int32]float64{}}
	for _, p := range measured() {
		m.from[p.Pid] = cpuSeconds(p)
	}
	return m
}

// measured are this process and its children.
func measured() []*process.Process {
	self, err := process.NewProcess(int32(os.Getpid()))
	if err != nil {
		return nil
	}
	children, _ := self.Children() // none: an error
	return append([]*process.Process{self}, children...)
}

func cpuSeconds(p *process.Process) float64 {
	t, err := p.Times()
	if err != nil {
		return 0
	}
	return t.User + t.System
}

// uses are the CPU seconds each process took since the start: this one
// first ("sasctl"), then the children by the most.
func (m *cpuMeter) uses() []cpuUse {
	var out []cpuUse
	for i, p := range measured() {
		u := cpuUse{name: "sasctl", seconds: cpuSeconds(p) - m.from[p.Pid]}
		if i > 0 {
			u.name = emulatorName(p)
		}
		out = append(out, u)
	}
	if len(out) > 1 {
		slices.SortFunc(out[1:], func(a, b cpuUse) int { return int(1000 * (b.seconds - a.seconds)) })
	}
	return out
}

// emulatorName names a child process by what it runs.
func emulatorName(p *process.Process) string {
	cmdline, _ := p.Cmdline()
	switch {
	case strings.Contains(cmdline, "DynamoDBLocal"):
		return "DynamoDB Local"
	case strings.Contains(cmdline, "moto"):
		return "moto"
	}
	name, _ := p.Name()
	return name
}

// printCPU writes the CPU seconds each process took, and per order.
func printCPU(out io.Writer, uses []cpuUse, orders int) {
	if len(uses) == 0 {
		return
	}
	total := 0.0
	var parts []string
	for _, u := range uses {
		total += u.seconds
		parts = append(parts, fmt.Sprintf("%s %.1f", u.name, u.seconds))
	}
	fmt.Fprintf(out, "  %-28s %s; %.1f in all, %.1f ms an order (sasctl: the handlers, the runner, the queues in process, "+
		"the simulator)\n", "CPU seconds", strings.Join(parts, ", "), total, 1000*total/float64(max(orders, 1)))
}
