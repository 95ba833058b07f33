package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// listed are the ids sasctl list prints (JSON) for the flags, every page
// read (pages of one when paged).
func (p *pipeline) listed(paged bool, flags ...string) []string {
	p.t.Helper()
	var ids []string
	next := ""
	for {
		args := slices.Clone(flags)
		if paged {
			args = append(args, "--limit", "1")
		}
		if next != "" {
			args = append(args, "--next", next)
		}
		var page listPage
		p.json("list", &page, "list", args...)
		for _, o := range page.Orders {
			ids = append(ids, o.OrderID)
		}
		if next = page.Next; next == "" {
			return ids
		}
	}
}

// The order workflow with customerId searchable: sasctl list finds the
// orders of a customer by the field's index, and the orders by the step,
// agent and reason they failed with, their version and their end time.
func TestListFindsOrdersByFieldStepReasonVersionAndEnd(t *testing.T) {
	t.Parallel()
	text, err := workflow.ExampleFile(workflow.OrderWorkflow)
	require.NoError(t, err)
	d, err := workflow.ParseFile("order.yaml", append(text, "search: [customerId]\n"...), workflow.Options{})
	require.NoError(t, err)
	p := newPipelineOf(t, workflow.MustSet(d), workflow.Settings{StepTimeout: 8 * time.Second, MaxFailures: 3,
		PickupTimeout: 2 * time.Second})
	p.sim.SetFaults("payment", remotesim.Faults{PermanentOrders: []string{"o-b"}}) // a card refused
	for id, customer := range map[string]int{"o-a": 1, "o-b": 1, "o-c": 2} {
		code, _, errs := p.ctl(orderJSONOf(id, customer), "submit", "-")
		require.Zero(t, code, errs)
	}
	p.waitEnded("o-a", "o-b", "o-c")

	for _, paged := range []bool{false, true} {
		require.ElementsMatch(t, []string{"o-a", "o-b"}, p.listed(paged, "--field", "customerId=customer-1"), "paged: %v", paged)
	}
	require.Equal(t, []string{"o-c"}, p.listed(false, "--field", "customerId=customer-2"))
	require.Empty(t, p.listed(false, "--field", "customerId=customer-3"))
	file := filepath.Join(t.TempDir(), "order.yaml")
	require.NoError(t, os.WriteFile(file, append(text, "search: [customerId]\n"...), 0o600))
	code, _, errs := p.ctl("", "list", "--field", "customerID=customer-1", "--workflows", file)
	require.NotZero(t, code, "a mistyped field is no empty list")
	require.Contains(t, errs, `no workflow declares "customerID" in its search: (searchable: customerId)`)
	require.Equal(t, []string{"o-b"}, p.listed(false, "--field", "customerId=customer-1", "--state", "failed"))
	require.Equal(t, []string{"o-b"}, p.listed(true, "--step", "charge-payment", "--reason", "refused"))
	require.Equal(t, []string{"o-b"}, p.listed(false, "--agent", "payment"))
	require.Equal(t, []string{"o-b"}, p.listed(true, "--state", "failed"), "by the end index")

	// An order that ended before the deployment had its end index has no
	// entry in it: --scan finds it.
	_, err = p.stack.Deployment.Clients.DynamoDB.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(p.stack.Topology().StateTable()),
		Key: map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: "o-b"},
			topology.KeySort: &types.AttributeValueMemberS{Value: "TASK"}},
		UpdateExpression: aws.String("REMOVE " + topology.KeyEndShard)})
	require.NoError(t, err)
	require.Empty(t, p.listed(false, "--state", "failed"))
	require.Equal(t, []string{"o-b"}, p.listed(false, "--state", "failed", "--scan"))
	require.Empty(t, p.listed(false, "--reason", "timeout"))
	var page listPage
	p.json("list", &page, "list", "--field", "customerId=customer-2")
	require.NotEmpty(t, page.Orders[0].Version)
	require.ElementsMatch(t, []string{"o-a", "o-b", "o-c"}, p.listed(false, "--version", page.Orders[0].Version, "--ended-after", "1h"))
	require.Empty(t, p.listed(false, "--version", "other"))
	require.Empty(t, p.listed(false, "--ended-before", "1h"))

	code, _, errs = p.ctl("", "list", "--field", "customerId")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--field: \"customerId\": write a searchable field's value as name=value")
}

// orderJSONOf is a demo order of customer customer-<customer>.
func orderJSONOf(id string, customer int) string { return localrun.DemoOrder(id, customer).JSON() }
