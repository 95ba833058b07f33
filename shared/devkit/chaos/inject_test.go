package chaos

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/runner"
)

// Each delivery of the same message draws its fate anew: at a 50% delay
// rate, about half of many deliveries of one body are delayed, not all or
// none (which dead-lettered messages before the fix).
func TestEveryDeliveryDrawsAnew(t *testing.T) {
	in := NewInjector(Plan{Seed: 5, Delay: 0.5})
	for _, body := range []string{`{"orderId":"x"}`, `{"orderId":"chaos-5-00001"}`} {
		delayed := 0
		for range 400 {
			if in.Message("submission", types.Message{Body: aws.String(body)}) == runner.Delay {
				delayed++
			}
		}
		require.InDelta(t, 200, delayed, 40, body)
	}
}

// The same seed makes the same decisions.
func TestSameSeedSameFaults(t *testing.T) {
	draw := func(seed uint64) string {
		in := NewInjector(Plan{Seed: seed, Drop: 0.2, Delay: 0.2, Duplicate: 0.2})
		var out []runner.Action
		for i := range 50 {
			out = append(out, in.Message("scheduler", types.Message{Body: aws.String(fmt.Sprint(i % 7))}))
		}
		return fmt.Sprint(out)
	}
	require.Equal(t, draw(1), draw(1))
	require.NotEqual(t, draw(1), draw(2))
}
