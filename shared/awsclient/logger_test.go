package awsclient

import (
	"fmt"
	"testing"

	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/require"
)

type lines []string

func (l *lines) Logf(c logging.Classification, format string, v ...any) {
	*l = append(*l, fmt.Sprintf(string(c)+" "+format, v...))
}

func TestQuietLoggerDropsOnlyTheDrainWarning(t *testing.T) {
	var got lines
	q := quietLogger{&got}
	q.Logf(logging.Warn, "failed to discard remaining HTTP response body, this may affect connection reuse")
	q.Logf(logging.Warn, "request to %s throttled", "sqs")
	require.Equal(t, lines{"WARN request to sqs throttled"}, got)
}
