package deployment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/deployment"
)

// The network settings read from the context place the functions they
// name (every function when they name none), each in its agent's own
// subnets or security groups, each kind it names, or the stack's; and
// agentNetworks prints back what it read.
func TestANetworkPlacesWhatItNames(t *testing.T) {
	t.Parallel()
	ctx := map[string]string{"vpcId": "vpc-0a1b2c3d", "vpcSubnets": "subnet-0a000001,subnet-0a000002",
		"vpcRouteTables": "rtb-0a000001", "agentNetworks": "payment=sg-0c000001; shipping=subnet-0b000001,sg-0c000002,subnet-0b000002"}
	s, err := deployment.FromContext(func(k string) string { return ctx[k] })
	require.NoError(t, err)
	n := s.Network
	require.NoError(t, n.Validate([]string{"payment", "shipping", "inventory"}))
	for _, f := range []string{"submission", "scheduler", "supervisor", "payment", "inventory"} {
		require.True(t, n.Placed(f), "%s: no vpcFunctions places every function", f)
	}
	subnets, groups := n.Of("submission", false)
	require.Equal(t, []string{"subnet-0a000001", "subnet-0a000002"}, subnets)
	require.Empty(t, groups, "none given: the stack's own")
	subnets, groups = n.Of("payment", true)
	require.Equal(t, []string{"subnet-0a000001", "subnet-0a000002"}, subnets, "the stack's subnets: it names none")
	require.Equal(t, []string{"sg-0c000001"}, groups)
	subnets, groups = n.Of("shipping", true)
	require.Equal(t, []string{"subnet-0b000001", "subnet-0b000002"}, subnets)
	require.Equal(t, []string{"sg-0c000002"}, groups)
	st, _ := deployment.Lookup("agentNetworks")
	require.Equal(t, "payment=sg-0c000001;shipping=subnet-0b000001,sg-0c000002,subnet-0b000002", st.Value(&s).String())

	n.Functions = []string{"payment"}
	require.False(t, n.Placed("submission"), "vpcFunctions names who is placed")
	require.ErrorContains(t, n.Validate([]string{"payment", "shipping"}), "agentNetworks gives agent shipping a network, but vpcFunctions does not place it")
	require.False(t, (deployment.Network{Subnets: []string{"subnet-0a000001"}}).Placed("submission"), "no VPC: nothing placed")
}

// What one network setting needs of another is refused at synth, naming
// what to set.
func TestANetworkNeedsWhatItNames(t *testing.T) {
	t.Parallel()
	agents := []string{"payment"}
	base := deployment.Network{VPCID: "vpc-0a1b2c3d", Subnets: []string{"subnet-0a000001"}, RouteTables: []string{"rtb-0a000001"}}
	for want, n := range map[string]deployment.Network{
		"need vpcId":                       {Subnets: base.Subnets},
		"needs vpcSubnets":                 {VPCID: base.VPCID, RouteTables: base.RouteTables},
		"needs vpcRouteTables":             {VPCID: base.VPCID, Subnets: base.Subnets},
		"all, or the services":             withNet(base, func(n *deployment.Network) { n.ExistingEndpoints = []string{"all", "sqs"} }),
		"vpcFunctions names billing":       withNet(base, func(n *deployment.Network) { n.Functions = []string{"billing"} }),
		"agentNetworks names ledger":       withNet(base, func(n *deployment.Network) { n.AgentNetworks = map[string][]string{"ledger": {"sg-0c000001"}} }),
		"not one of this deployment's age": withNet(base, func(n *deployment.Network) { n.AgentNetworks = map[string][]string{"submission": {"sg-0c000001"}} }),
	} {
		require.ErrorContains(t, n.Validate(agents), want)
	}
	require.NoError(t, base.Validate(agents))
	gateways := base
	gateways.RouteTables, gateways.ExistingEndpoints = nil, []string{"dynamodb", "s3"}
	require.NoError(t, gateways.Validate(agents), "no route tables needed when the gateway endpoints exist")
	require.NoError(t, deployment.Network{}.Validate(agents), "no network")
}

func withNet(n deployment.Network, f func(*deployment.Network)) deployment.Network {
	f(&n)
	return n
}
