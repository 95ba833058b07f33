package localrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/functions/loyalty/points"
	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// recorder is a Go agent that remembers what it was asked, around
// points.Service, the repo's worked example.
type recorder struct {
	mu    sync.Mutex
	calls []string // orderID/action
}

func (r *recorder) Apply(ctx context.Context, action, key string, payload []byte) ([]byte, error) {
	var doc struct { // the step's document
		Order struct {
			OrderID string `json:"orderId"`
		} `json:"order"`
	}
	_ = json.Unmarshal(payload, &doc)
	r.mu.Lock()
	r.calls = append(r.calls, doc.Order.OrderID+"/"+action)
	r.mu.Unlock()
	return points.Service{}.Apply(ctx, action, key, payload)
}

func (r *recorder) of(orderID string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var got []string
	for _, c := range r.calls {
		if a, ok := strings.CutPrefix(c, orderID+"/"); ok {
			got = append(got, a)
		}
	}
	return got
}

// credentials are the fulfilment workflow's secrets, kept in moto's Secrets
// Manager and SSM as a deployment keeps them in AWS's.
type credentials struct {
	secret, parameter string // their names
	apiKey, token     string // their values
	secrets           *secretsmanager.Client
}

func keepCredentials(t *testing.T, name string) credentials {
	t.Helper()
	ctx := context.Background()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: motoEndpoint, Emulated: true})
	require.NoError(t, err)
	cr := credentials{secret: name + "/warehouse-key", parameter: "/" + name + "/billing-token",
		apiKey: "wh-key-" + name, token: "tok-" + name, secrets: secretsmanager.NewFromConfig(c.Config)}
	_, err = cr.secrets.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: &cr.secret, SecretString: &cr.apiKey})
	require.NoError(t, err)
	_, err = ssm.NewFromConfig(c.Config).PutParameter(ctx, &ssm.PutParameterInput{Name: &cr.parameter,
		Value: &cr.token, Type: ssmtypes.ParameterTypeSecureString})
	require.NoError(t, err)
	return cr
}

// fulfilment runs the four-step example beside the order workflow: each of
// its services at its own endpoint, the warehouse behind an API key from
// Secrets Manager, billing behind a bearer token from SSM, the courier behind
// SigV4, and loyalty points by an Agent written in Go.
func fulfilment(t *testing.T, cr credentials, loyalty *recorder) *env {
	t.Helper()
	sets := workflow.MustSet(workflow.MustExample(workflow.OrderWorkflow), workflow.MustExample("fulfilment"))
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		patient(o)
		service := func(name string) string { return o.RemoteURL + "/v1/services/" + name }
		o.Workflows = sets
		o.Vars = map[string]string{"WAREHOUSE_URL": service("warehouse"), "WAREHOUSE_SECRET": cr.secret,
			"BILLING_URL": service("billing"), "BILLING_TOKEN_PARAMETER": cr.parameter,
			"COURIER_URL": service("courier"), "AWS_REGION": "us-east-1",
			"COURIER_API_ARN": "arn:aws:execute-api:us-east-1:*:courier/*"}
		o.Remotes = map[string]agent.Remote{"loyalty": loyalty}
	})
	return e
}

func TestFourStepWorkflowWithItsOwnServicesAndCredentials(t *testing.T) {
	t.Parallel()
	cr := keepCredentials(t, fmt.Sprintf("wf%d", time.Now().UnixNano()%1e9))
	loyalty := &recorder{}
	e := fulfilment(t, cr, loyalty)
	creds, err := e.stack.Deployment.Clients.Config.Credentials.Retrieve(context.Background())
	require.NoError(t, err)
	e.sim.Guard("warehouse", remotesim.RequireHeader("X-Api-Key", cr.apiKey))
	e.sim.Guard("billing", remotesim.RequireHeader("Authorization", "Bearer "+cr.token))
	e.sim.Guard("courier", remotesim.RequireSigV4(creds, "execute-api", "us-east-1"))

	ful := localrun.DemoOrder("f-1", 1)
	ful.Workflow = "fulfilment"
	require.NoError(t, e.stack.SendOrders(context.Background(), ful.JSON(), localrun.DemoOrder("o-1", 2).JSON()))
	tasks := e.waitEnded([]string{"f-1", "o-1"})
	require.Equal(t, workflow.Processed, tasks["f-1"].State)
	require.Equal(t, workflow.Processed, tasks["o-1"].State, "the order workflow runs beside it")
	e.requireLedger("f-1", "picks", "invoice", "book-courier")
	e.requireLedger("o-1", forward...)
	require.Equal(t, []string{points.Award}, loyalty.of("f-1"), "the Go agent ran its step once")
	require.Zero(t, e.sim.Stats().Unauthorized, "every call carried its credentials")

	// The warehouse's key is rotated: the next call is refused once, the
	// Agent reads the secret again, and the order goes on.
	rotated := cr.apiKey + "-rotated"
	_, err = cr.secrets.PutSecretValue(context.Background(), &secretsmanager.PutSecretValueInput{
		SecretId: &cr.secret, SecretString: &rotated})
	require.NoError(t, err)
	e.sim.Guard("warehouse", remotesim.RequireHeader("X-Api-Key", rotated))
	ful.OrderID = "f-2"
	require.NoError(t, e.stack.SendOrders(context.Background(), ful.JSON()))
	require.Equal(t, workflow.Processed, e.waitEnded([]string{"f-2"})["f-2"].State)
	require.Positive(t, e.sim.Stats().Unauthorized, "the old key was refused")
	e.requireLedger("f-2", "picks", "invoice", "book-courier")

	requireNoSecret(t, e, "f-2", cr.apiKey, rotated, cr.token)
}

// requireNoSecret asserts no credential's value is in the handlers' logs or
// in the order's records.
func requireNoSecret(t *testing.T, e *env, orderID string, values ...string) {
	t.Helper()
	_, recs, err := e.stack.Store.Load(context.Background(), orderID)
	require.NoError(t, err)
	stored := fmt.Sprintf("%+v", recs)
	logs := e.logs.Tail(1 << 30)
	require.Contains(t, logs, "401", "the refused call is logged")
	for _, v := range values {
		require.NotContains(t, logs, v)
		require.NotContains(t, stored, v)
	}
}

// An order naming a workflow the deployment does not run is rejected to the
// orders DLQ with the reason, and the next order goes on.
func TestOrderOfAnUnknownWorkflowIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	bad := localrun.DemoOrder("o-what", 1)
	bad.Workflow = "returns"
	require.NoError(t, e.stack.SendOrders(context.Background(), bad.JSON(), localrun.DemoOrder("o-ok", 2).JSON()))
	reason := e.rejection(e.stack.Topology().OrdersQueue().DLQName, `"orderId":"o-what"`)
	require.Equal(t, `invalid message: order o-what: workflow "returns" is not one this deployment runs (order)`, reason)
	require.Equal(t, workflow.Processed, e.waitEnded([]string{"o-ok"})["o-ok"].State)
	_, err := e.stack.Store.Order(context.Background(), "o-what")
	require.Error(t, err, "nothing stored for it")
}

// A deployment that changes a workflow while orders run: an order in flight
// keeps the definition it started with, a new one gets the new definition.
func TestOrderInFlightKeepsItsWorkflowVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		patient(o)
		o.Stopped = []string{"agent-payment"} // the order waits at its second step
	})
	e.orders(1)
	e.eventually("the first step done", 60*time.Second, func() bool {
		_, recs, err := e.stack.Store.Load(context.Background(), "order-000")
		return err == nil && recs[0].State == workflow.Processed
	})
	v1 := e.records("order-000")[workflow.Ref{Index: 1}].WfVersion
	e.stop()

	// The new version adds a step after the shipment; the stack restarts
	// with it, the payment agent running again.
	data, err := workflow.ExampleFile(workflow.OrderWorkflow)
	require.NoError(t, err)
	data = append(data, []byte("  - name: send-invoice\n    agent: payment\n")...)
	v2, err := workflow.ParseFile("order.yaml", data, workflow.Options{})
	require.NoError(t, err)
	require.NotEqual(t, v1, v2.Version)
	o := e.stack.Opts
	o.Workflows, o.Stopped = workflow.MustSet(v2), nil
	e.stack, err = localrun.New(context.Background(), o)
	require.NoError(t, err)
	e.start()

	require.NoError(t, e.stack.SendOrders(context.Background(), localrun.DemoOrder("order-new", 9).JSON()))
	tasks := e.waitEnded([]string{"order-000", "order-new"})
	require.Equal(t, workflow.Processed, tasks["order-000"].State)
	require.Equal(t, workflow.Processed, tasks["order-new"].State)
	e.requireLedger("order-000", forward...)
	e.requireLedger("order-new", append(forward, "send-invoice")...)
}

// An order resent after its workflow left the deployment is the same order:
// an idempotent success that runs what it started with (not a rejection),
// while a new order naming that workflow is refused.
func TestAResendOutlivesItsWorkflow(t *testing.T) {
	t.Parallel()
	both := workflow.MustSet(workflow.MustExample(workflow.OrderWorkflow), workflow.MustExample(workflow.SingleWorkflow))
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) { patient(o); o.Workflows = both })
	single := localrun.DemoOrder("s-1", 1)
	single.Workflow = workflow.SingleWorkflow
	require.NoError(t, e.stack.SendOrders(context.Background(), single.JSON()))
	require.Equal(t, workflow.Processed, e.waitEnded([]string{"s-1"})["s-1"].State)
	e.stop()

	o := e.stack.Opts
	o.Workflows = workflow.MustSet(workflow.MustExample(workflow.OrderWorkflow)) // single is gone
	var err error
	e.stack, err = localrun.New(context.Background(), o)
	require.NoError(t, err)
	e.start()
	other := single
	other.OrderID = "s-2"
	require.NoError(t, e.stack.SendOrders(context.Background(), single.JSON(), other.JSON()))
	reason := e.rejection(e.stack.Topology().OrdersQueue().DLQName, `"orderId":"s-2"`)
	require.Contains(t, reason, `workflow "single" is not one this deployment runs (order)`)
	e.eventually("the resend counted a duplicate", 30*time.Second, func() bool {
		return e.stack.Tally.Sum(metrics.DuplicateOrders) >= 1
	})
	require.Equal(t, 1, strings.Count(e.logs.Tail(1<<30), "message rejected to the DLQ"), "only the new order was refused")
	e.requireLedger("s-1", "charge-payment")
}
