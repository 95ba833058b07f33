package harness

import (
	"os"
	"slices"
	"strings"

	"github.com/shirou/gopsutil/v4/process"
)

// ProcUse is what the processes of one kind took: their CPU seconds over a
// measure and the sum of their peak resident sets.
type ProcUse struct {
	Name       string  `json:"name"`
	Count      int     `json:"count"`
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakRSSMB  float64 `json:"peakRssMB"`
}

// CPUSnapshot holds the CPU seconds of each process of this program's tree.
type CPUSnapshot map[int32]float64

// tree is this process and every process under it.
func tree() []*process.Process {
	self, err := process.NewProcess(int32(os.Getpid()))
	if err != nil {
		return nil
	}
	out := []*process.Process{self}
	for i := 0; i < len(out); i++ {
		children, _ := out[i].Children() // none: an error
		out = append(out, children...)
	}
	return out
}

// SnapCPU reads the CPU seconds of every process of the tree.
func SnapCPU() CPUSnapshot {
	s := CPUSnapshot{}
	for _, p := range tree() {
		if t, err := p.Times(); err == nil {
			s[p.Pid] = t.User + t.System
		}
	}
	return s
}

// UsesSince are the CPU seconds each kind of process took since from, and
// the sum of their peak resident sets (VmHWM) so far: this process first
// (named self), then the others by the most CPU.
func UsesSince(from CPUSnapshot, self string) []ProcUse {
	byName := map[string]*ProcUse{}
	var names []string
	for i, p := range tree() {
		name := self
		if i > 0 {
			name = kindOf(p)
		}
		u := byName[name]
		if u == nil {
			u = &ProcUse{Name: name}
			byName[name] = u
			names = append(names, name)
		}
		u.Count++
		if t, err := p.Times(); err == nil {
			u.CPUSeconds += t.User + t.System - from[p.Pid]
		}
		if m, err := p.MemoryInfo(); err == nil {
			u.PeakRSSMB += float64(max(m.HWM, m.RSS)) / (1 << 20)
		}
	}
	out := make([]ProcUse, 0, len(names))
	for _, n := range names {
		out = append(out, *byName[n])
	}
	slices.SortStableFunc(out[1:], func(a, b ProcUse) int { return int(1000 * (b.CPUSeconds - a.CPUSeconds)) })
	return out
}

// kindOf names a child process by what it runs.
func kindOf(p *process.Process) string {
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
