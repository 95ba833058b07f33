//go:build !unix

package handlerbench

import "time"

// CPUTime is zero where the process's CPU time is not read.
func CPUTime() time.Duration { return 0 }
