package main

import (
	"bytes"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The CPU a local run takes is split between this process and each child
// it started (an emulator), measured from the start: a busy child's seconds
// are its own, not this process's.
func TestTheCPUOfARunIsSplitBetweenThisProcessAndItsEmulators(t *testing.T) {
	m := startCPU()
	busy := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, busy.Start())
	t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })
	child := func() cpuUse {
		uses := m.uses()
		require.Equal(t, "sasctl", uses[0].name, "this process first")
		i := slices.IndexFunc(uses, func(u cpuUse) bool { return u.name == "sh" })
		if i < 0 {
			return cpuUse{}
		}
		return uses[i]
	}
	require.Eventually(t, func() bool { return child().seconds >= 0.2 }, time.Minute, 50*time.Millisecond,
		"the busy child's CPU is counted as its own")
	var out bytes.Buffer
	printCPU(&out, m.uses(), 10)
	require.Regexp(t, `CPU seconds +sasctl \d+\.\d, (.+, )?sh \d+\.\d(, .+)?; \d+\.\d in all, \d+\.\d ms an order`, out.String())
}
