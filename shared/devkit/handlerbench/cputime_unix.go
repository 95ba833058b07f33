//go:build unix

package handlerbench

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time this process has used, user and system, every
// goroutine's (a benchmark's garbage collection included); zero if the
// system does not say.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
