package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A client not told the deployment's retention leaves its operator's store
// not told (no expiry of its own, expiries only pushed out: operator.New),
// rather than told 0, which is the deployment's "kept for ever" and would
// push out no expiry at all; told one, it takes it, 0 included; a negative
// one is refused.
func TestAClientNotToldTheRetentionLeavesItsStoreNotTold(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	ctx := context.Background()
	for _, c := range []struct {
		days *int
		keep time.Duration
		told bool
	}{{nil, 0, false}, {ptr(0), 0, true}, {ptr(30), 30 * 24 * time.Hour, true}} {
		cl, err := New(ctx, Options{Prefix: "shop", Endpoint: "http://127.0.0.1:1", RetentionDays: c.days})
		require.NoError(t, err)
		keep, told := cl.op.Store.Retention()
		require.Equal(t, c.told, told, "%v", c.days)
		require.Equal(t, c.keep, keep, "%v", c.days)
	}
	_, err := New(ctx, Options{Prefix: "shop", Endpoint: "http://127.0.0.1:1", RetentionDays: ptr(-1)})
	require.ErrorContains(t, err, "RetentionDays -1: must not be negative")
}

func ptr(n int) *int { return &n }
