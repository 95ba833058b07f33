package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/workflow"
)

// The agent's own work per message: decode the request, claim and record (a
// stand-in that answers at once), check the breaker, encode the reply. The remote
// answers at once; the queue only encodes.
type instantRemote struct{}

func (instantRemote) Apply(_ context.Context, action, key string, _ []byte) ([]byte, error) {
	return []byte(`{"action":"` + action + `","key":"` + key + `"}`), nil
}

func BenchmarkAgentPerMessage(b *testing.B) {
	store := &claims{timeout: time.Hour}
	h := agent.New(agent.Config{Workflows: workflow.MustSet(workflow.Orders(workflow.Settings{})), Name: "payment", InstanceID: "agent-payment/bench", ResponseQueueURL: "q", DLQURL: "dlq"},
		agent.Deps{Remote: instantRemote{}, Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second},
			Store: store, Outcomes: recorder{store}, Send: handlerbench.EncodeOnly{}, Metrics: metrics.New(io.Discard, "agent"),
			Log: slog.New(slog.DiscardHandler)})
	var bodies []string
	for i := range 10 {
		bodies = append(bodies, fmt.Sprintf(`{"orderId":"o-%d","step":1,"stepName":"charge-payment"}`, i))
	}
	handlerbench.Run(b, h.Handle, handlerbench.Batch(bodies...))
}
