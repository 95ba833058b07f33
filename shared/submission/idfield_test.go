package submission_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/submission"
	"github.com/sas-go/sas/shared/workflow"
)

// memStore keeps what Submission stores, by order id: the orders, and
// their definitions (a repeat is not created again).
type memStore struct {
	submission.Store // what these tests do not reach: nil
	mu               sync.Mutex
	orders           map[string]string
	defs             map[string]workflow.Definition
}

func (s *memStore) Submit(_ context.Context, sub statestore.Submission) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.orders[sub.OrderID]; ok {
		return false, nil
	}
	s.orders[sub.OrderID], s.defs[sub.OrderID] = sub.Order, sub.Workflow
	return true, nil
}

func (s *memStore) Order(_ context.Context, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orders[id], nil
}

func (s *memStore) Definition(_ context.Context, id string) (workflow.Definition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.defs[id]
	if !ok {
		return d, statestore.ErrNotFound
	}
	return d, nil
}

func (s *memStore) WasSent(context.Context, string, string) (bool, error) { return false, nil }

// sent records the messages Submission sends, and those it rejects.
type sent struct {
	mu       sync.Mutex
	requests []message.AgentRequest
	rejected []string // reasons
}

func (r *sent) SendJSON(_ context.Context, _ string, v any, _ time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req, ok := v.(message.AgentRequest); ok {
		r.requests = append(r.requests, req)
	}
	return nil
}

func (r *sent) Reject(_ context.Context, _, _, _, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = append(r.rejected, reason)
	return nil
}

// loanFile is a workflow whose orders are named by their applicationId.
const loanFile = `name: loan
id: applicationId
defaults: {timeout: 10s}
agents:
  bank: {endpoint: "http://127.0.0.1:1/bank"}
steps:
  - {name: disburse, agent: bank, undo: {name: claw-back}}
`

// Submission takes a loan by its applicationId: stored under it, its
// first request sent for it, a resend of the same application a
// duplicate (its request sent again, nothing stored twice), the same
// applicationId with other content a conflict naming the field, and an
// application with only an orderId refused naming the field it lacks.
// Shop orders beside it keep their orderId.
func TestSubmissionTakesAnOrderByItsWorkflowsIDField(t *testing.T) {
	t.Parallel()
	loan, err := workflow.ParseFile("loan.yaml", []byte(loanFile), workflow.Options{})
	require.NoError(t, err)
	shop := workflow.MustExample(workflow.SingleWorkflow)
	set := workflow.MustSet(shop, loan)
	queues := map[string]string{"bank": "q-bank"}
	for _, a := range shop.Agents() {
		queues[a] = "q-" + a
	}
	store := &memStore{orders: map[string]string{}, defs: map[string]workflow.Definition{}}
	out := &sent{}
	m, log := metrics.New(io.Discard, "submission"), slog.New(slog.DiscardHandler)
	h, err := submission.New(submission.Config{Workflows: set, AgentQueues: queues, DLQURL: "dlq"},
		submission.Deps{Store: store, Send: out, Notify: notify.New(out, nil, m, log), Metrics: m, Log: log})
	require.NoError(t, err)
	handle := func(body string) {
		_, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: body}}})
		require.NoError(t, err)
	}

	application := `{"applicationId":"A-1","workflow":"loan","orderId":"shop-9","amount":1200}`
	handle(application)
	require.Equal(t, application, store.orders["A-1"], "stored under its applicationId, its orderId data")
	require.Len(t, out.requests, 1)
	require.Equal(t, "A-1", out.requests[0].OrderID)

	handle(application)
	require.Len(t, store.orders, 1, "a resend of the same application is a duplicate")
	require.Len(t, out.requests, 2, "its first request sent again")
	require.Empty(t, out.rejected)

	handle(`{"applicationId":"A-1","workflow":"loan","amount":1}`)
	handle(`{"orderId":"A-2","workflow":"loan","amount":1}`)
	require.Equal(t, []string{
		"invalid message: applicationId A-1 was already accepted with different content",
		"invalid message: an order needs its id, applicationId (workflow loan's id field); its orderId is not its id",
	}, out.rejected)

	shopOrder := `{"orderId":"A-2","customerId":"c-1","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`
	handle(shopOrder)
	require.Equal(t, shopOrder, store.orders["A-2"], "an order naming no workflow runs the default, named by its orderId")
	require.Equal(t, shop.Name, store.defs["A-2"].Name)
	require.Len(t, out.rejected, 2)
	require.Equal(t, "A-2", out.requests[2].OrderID)
}
