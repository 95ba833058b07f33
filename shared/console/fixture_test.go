package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/console"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

var motoEndpoint, dynamodbEndpoint string

func TestMain(m *testing.M) {
	os.Exit(emulatortest.MainWithMotoAndDynamoDBLocal(m, &motoEndpoint, &dynamodbEndpoint))
}

// pipeline is a local stack running for the whole test binary, shared by the
// tests (each uses its own order ids).
type pipeline struct {
	stack *localrun.Stack
	sim   *remotesim.Simulator
	op    *operator.Operator
}

var (
	shared     *pipeline
	sharedErr  error
	sharedOnce sync.Once
)

// thePipeline starts the shared stack on first use.
func thePipeline(t *testing.T) *pipeline {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = startPipeline() })
	require.NoError(t, sharedErr)
	return shared
}

func startPipeline() (*pipeline, error) {
	ctx := context.Background()
	sim := remotesim.New(1)
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("con%d", time.Now().UnixNano()%1e6)
	stack, err := localrun.New(ctx, localrun.Options{Endpoint: motoEndpoint, DynamoDBEndpoint: dynamodbEndpoint,
		Prefix: prefix, RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second, SupervisorEvery: 200 * time.Millisecond,
		Workflows:      workflow.MustSet(searchable(), workflow.MustExample("approval"), holding()),
		DeadlineShards: 4, Settings: workflow.Settings{StepTimeout: 10 * time.Second, MaxFailures: 3,
			RetryBackoff: 100 * time.Millisecond, PickupTimeout: 3 * time.Second}})
	if err != nil {
		return nil, err
	}
	go func() { _ = stack.Run(context.Background()) }() // runs until the test binary exits
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: motoEndpoint, DynamoDBEndpoint: dynamodbEndpoint, Emulated: true})
	if err != nil {
		return nil, err
	}
	op := operator.New(c, stack.Topology())
	op.PickupTimeout = 3 * time.Second
	return &pipeline{stack: stack, sim: sim, op: op}, nil
}

// serve starts a console on the pipeline (with faults, if given) and returns
// its base URL ("http://127.0.0.1:PORT").
func serve(t *testing.T, p *pipeline, faults console.FaultControl) string {
	t.Helper()
	srv, err := console.New(console.Config{Operator: p.op, Faults: faults, Refresh: 300 * time.Millisecond, Who: "console-test"})
	require.NoError(t, err)
	l, err := console.Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return strings.TrimSuffix(console.URL(l), "/")
}

// holding is the order workflow as "order-hold", whose payment holds the
// order for its operator on failure.
// searchable is the order workflow with its customerId searchable.
func searchable() workflow.Definition {
	text, err := workflow.ExampleFile(workflow.OrderWorkflow)
	if err != nil {
		panic(err)
	}
	d, err := workflow.ParseFile("order.yaml", append(text, "search: [customerId]\n"...), workflow.Options{})
	if err != nil {
		panic(err)
	}
	return d
}

func holding() workflow.Definition {
	text, err := workflow.ExampleFile(workflow.OrderWorkflow)
	if err != nil {
		panic(err)
	}
	s := strings.Replace(string(text), "name: order\n", "name: order-hold\n", 1)
	s = strings.Replace(s, "  - name: charge-payment\n    agent: payment\n", "  - name: charge-payment\n    agent: payment\n    onFailure: hold\n", 1)
	d, err := workflow.ParseFile("order-hold.yaml", []byte(s), workflow.Options{})
	if err != nil {
		panic(err)
	}
	return d
}

// approvalOrder is an order of the approval workflow: it waits for the
// event approved.
func approvalOrder(id string) string {
	o := localrun.DemoOrder(id, 1)
	o.Workflow = "approval"
	return o.JSON()
}

// waitParked waits (bounded) until the order's step i is armed: waiting for
// its event.
func (p *pipeline) waitParked(t *testing.T, id string, i int) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, recs, err := p.stack.Store.Load(context.Background(), id)
		return err == nil && !recs[i].Armed.IsZero() && recs[i].State == workflow.Pending
	}, 90*time.Second, 100*time.Millisecond, "order %s's step %d never waited", id, i)
}

// waitState waits (bounded) until the order's task is in state.
func (p *pipeline) waitState(t *testing.T, id string, state workflow.State) {
	t.Helper()
	require.Eventually(t, func() bool {
		task, _, err := p.stack.Store.Load(context.Background(), id)
		return err == nil && task.State == state
	}, 90*time.Second, 100*time.Millisecond, "order %s never reached %s", id, state)
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// get fetches a page and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := noRedirect.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
