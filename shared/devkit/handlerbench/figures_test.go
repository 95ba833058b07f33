package handlerbench_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/handlerbench"
)

// ReadFigures reads each handler's throughput from `go test -bench`
// output, averaging a handler that ran more than once, and passes over
// every other line.
func TestReadFiguresFromBenchmarkOutput(t *testing.T) {
	t.Parallel()
	out := `goos: linux
BenchmarkThroughput/submission-2         	      20	  52000000 ns/op	       192.3 msgs/s	         5.200 ms/msg	   0.0013 GB-s/msg
BenchmarkThroughput/agent-2              	      20	  41000000 ns/op	       243.9 msgs/s	         4.100 ms/msg	   0.0005 GB-s/msg
BenchmarkThroughput/agent-2              	      20	  45000000 ns/op	       256.1 msgs/s	         3.900 ms/msg	   0.0007 GB-s/msg
BenchmarkSupervisorPerOverdueRecord-2   	     200	    165569 ns/op	     16557 ns/record	   41048 B/op	     704 allocs/op
PASS
`
	got, err := handlerbench.ReadFigures(strings.NewReader(out))
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, handlerbench.Figures{MsgsPerSecond: 192.3, MsPerMsg: 5.2, GBSecondsPerMsg: 0.0013}, got["submission"])
	require.InDelta(t, 250, got["agent"].MsgsPerSecond, 1e-9)
	require.InDelta(t, 4.0, got["agent"].MsPerMsg, 1e-9)
	require.InDelta(t, 0.0006, got["agent"].GBSecondsPerMsg, 1e-12)
	_, err = handlerbench.ReadFigures(strings.NewReader("BenchmarkX-2 1 abc msgs/s 2 ns/op\n"))
	require.Error(t, err)
}
