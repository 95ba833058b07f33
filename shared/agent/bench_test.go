package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/handlerbench"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/resilience"
)

// The agent's own work per message: decode the request, check the deadline
// and breaker, encode the reply. The remote answers at once; the queue only
// encodes.
type instantRemote struct{}

func (instantRemote) Apply(_ context.Context, action, key string, _ []byte) ([]byte, error) {
	return []byte(`{"action":"` + action + `","key":"` + key + `"}`), nil
}

func BenchmarkAgentPerMessage(b *testing.B) {
	h := agent.New(agent.Config{Name: "payment", ResponseQueueURL: "q", DLQURL: "dlq"}, instantRemote{},
		&resilience.Breaker{Threshold: 100, Cooldown: time.Second}, handlerbench.EncodeOnly{}, metrics.New(io.Discard, "agent"),
		slog.New(slog.DiscardHandler))
	completeBy := time.Now().Add(time.Hour).UnixMilli()
	var bodies []string
	for i := range 10 {
		bodies = append(bodies, fmt.Sprintf(`{"orderId":"o-%d","step":1,`+
			`"stepName":"charge-payment","attempt":1,"completeBy":%d,"idempotencyKey":"o-%d/charge-payment",`+
			`"payload":{"orderId":"o-%d","customerId":"c-1","items":[{"sku":"SKU-1","quantity":2,"unitPriceCents":499}]}}`,
			i, completeBy, i, i))
	}
	handlerbench.Run(b, h.Handle, handlerbench.Batch(bodies...))
}
