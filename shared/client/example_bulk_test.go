package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sas-go/sas/shared/client"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// An operator's tool cancels the orders of a customer who left: it finds
// them by a field the workflow declares searchable, runs a dry run (it
// writes nothing), then cancels the orders the dry run listed, paced
// (operator.BulkRate), each order's history naming the bulk action. Here
// against a local deployment with three such orders waiting for their
// approval (as sasctl dev runs one: its prefix and endpoint).
func ExampleClient_CancelMany() {
	ctx := context.Background()
	prefix, endpoint, stop := localDeployment("o-ex", 9, 3)
	defer stop()
	c, err := client.New(ctx, client.Options{Prefix: prefix, Endpoint: endpoint})
	if err != nil {
		log.Fatal(err)
	}
	customer := client.Search{Field: "customerId", Value: "customer-9"}
	found, _, err := c.Find(ctx, customer, 100, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d orders of customer-9, %s\n", len(found), found[0].State)

	dry, err := c.CancelMany(ctx, client.Bulk{Search: customer, By: "backoffice", DryRun: true}, "the customer left")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("dry run: %d listed, %d would be cancelled\n", dry.Listed, dry.Done)
	rep, err := c.CancelMany(ctx, client.Bulk{IDs: dry.Would(), FromDryRun: true, By: "backoffice"}, "the customer left")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d cancelled, %d refused, %d changed since the dry run\n", rep.Done, rep.Refused, rep.Changed)
	st, err := c.Status(ctx, dry.Would()[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Order.CancelledBy == rep.By, st.Order.CancelReason)
	// Output:
	// 3 orders of customer-9, Pending
	// dry run: 3 listed, 3 would be cancelled
	// 3 cancelled, 0 refused, 0 changed since the dry run
	// true the customer left
}

// localDeployment starts a local deployment of the approval workflow (its
// customerId searchable) on the tests' moto, with n orders (prefix-1…) of
// customer number customer waiting for their approval, and returns its
// prefix, its endpoint, and what stops it.
func localDeployment(prefix string, customer, n int) (name, endpoint string, stop func()) {
	ctx := context.Background()
	sim := remotesim.New(1)
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	name = fmt.Sprintf("ex%d", time.Now().UnixNano()%1e6)
	stack, err := localrun.New(ctx, localrun.Options{Endpoint: motoEndpoint, Prefix: name, RemoteURL: srv.URL,
		Workflows: workflow.MustSet(searchableApproval()), VisibilityTimeout: 5 * time.Second,
		SupervisorEvery: 200 * time.Millisecond, Settings: workflow.Settings{StepTimeout: 8 * time.Second}})
	if err != nil {
		log.Fatal(err)
	}
	region, hadRegion := os.LookupEnv("AWS_REGION")
	_ = os.Setenv("AWS_REGION", "us-east-1")
	stopStack := stack.Start(ctx)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i+1)
		o := localrun.DemoOrder(ids[i], customer)
		o.Workflow = "approval"
		if err := stack.SendOrders(ctx, o.JSON()); err != nil {
			log.Fatal(err)
		}
	}
	for _, id := range ids {
		waitArmed(ctx, stack, id)
	}
	return name, motoEndpoint, func() {
		stopStack()
		_ = srv.Close()
		if hadRegion {
			_ = os.Setenv("AWS_REGION", region)
		} else {
			_ = os.Unsetenv("AWS_REGION")
		}
	}
}

// waitArmed waits (a minute at most) until the order's second step waits
// for its event.
func waitArmed(ctx context.Context, stack *localrun.Stack, id string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, recs, err := stack.Store.Load(ctx, id)
		if err == nil && len(recs) > 1 && !recs[1].Armed.IsZero() && recs[1].State == workflow.Pending {
			return
		}
	}
	log.Fatalf("order %s never waited for its approval", id)
}
