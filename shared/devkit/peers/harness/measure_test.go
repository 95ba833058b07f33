package harness

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// The meter sees this process and the processes it started, by kind, and
// their memory.
func TestTheMeterSeesTheProcessesUnderIt(t *testing.T) {
	child := exec.Command("sleep", "5")
	if err := child.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	pids := treePIDs()
	if !slices.Contains(pids, int32(os.Getpid())) || !slices.Contains(pids, int32(child.Process.Pid)) {
		t.Fatalf("the tree %v misses this process %d or its child %d", pids, os.Getpid(), child.Process.Pid)
	}
	m := StartMeter("self")
	uses, peak := m.Stop()
	if len(uses) != 2 || uses[0].Name != "self" || uses[1].Name != "sleep" {
		t.Fatalf("uses %+v: want self, then sleep", uses)
	}
	if peak <= 0 || uses[0].PeakMB <= 0 {
		t.Fatalf("no memory measured: peak %.1f MB, uses %+v", peak, uses)
	}
}
