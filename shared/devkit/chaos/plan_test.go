package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A 10,000-order run takes about an hour on a 2-core machine: the default
// wait must not cut it short (sasctl chaos uses it when --timeout is unset).
func TestDefaultWaitGrowsWithTheOrders(t *testing.T) {
	require.Equal(t, 10*time.Minute+150*time.Second, DefaultPlan(1, 300).Timeout)
	require.Greater(t, DefaultPlan(1, 10000).Timeout, 90*time.Minute)
}
