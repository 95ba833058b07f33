package stack_test

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The network ids the tests place functions with.
const (
	testVPC     = "vpc-0a1b2c3d4e5f60789"
	subnetA     = "subnet-0a000000000000001"
	subnetB     = "subnet-0a000000000000002"
	subnetOwn   = "subnet-0b000000000000001"
	routeTableA = "rtb-0a000000000000001"
	routeTableB = "rtb-0a000000000000002"
	paymentSG   = "sg-0c000000000000001"
)

// authWorkflow writes a workflow whose agents read a parameter
// (inventory), a secret (payment) and nothing (shipping).
func authWorkflow(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "auth.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`name: auth
defaults: {timeout: 10s}
agents:
  inventory: {endpoint: "https://stock.internal", auth: {header: X-Api-Key, parameter: /shop/stock-key}}
  payment: {endpoint: "https://pay.internal", auth: {header: X-Api-Key, secret: shop/pay-key}}
  shipping: {endpoint: "https://ship.internal"}
steps:
  - {name: reserve, agent: inventory}
  - {name: charge, agent: payment}
  - {name: ship, agent: shipping}
`), 0o644))
	return file
}

// With context vpcId and vpcSubnets (and a key, sealed data, the ADOT
// layer's tracing with a headers secret, agents reading a secret and a
// parameter), every function is in the subnets given, with the stack's own
// security group but the payment agent, which has its own; each role may
// manage the network interfaces Lambda makes; and the stack makes every
// endpoint they then need, so that no NAT gateway is: DynamoDB and S3
// gateway endpoints on the route tables, and interface endpoints with
// private DNS for SQS, SNS, KMS, Secrets Manager, SSM and X-Ray, behind a
// security group that admits HTTPS from the functions' groups alone; each
// endpoint's policy lets only the account's principals through. cdk-nag
// and cfn-lint stay clean.
func TestAVPCPlacesEveryFunctionWithTheEndpointsItNeeds(t *testing.T) {
	tmpl, notes, path := synthKMS(t, "create", map[string]any{"sealData": "true", "workflows": authWorkflow(t),
		"tracing": "otlp", "adotLayerArn": "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1",
		"otlpEndpoint": "https://collector.internal:4318", "otlpHeadersSecret": "shop/otlp-headers",
		"vpcId": testVPC, "vpcSubnets": subnetA + "," + subnetB, "vpcRouteTables": routeTableA + "," + routeTableB,
		"agentNetworks": "payment=" + paymentSG})
	own := map[string]any{"Fn::GetAtt": []any{"FunctionsSecurityGroup", "GroupId"}}
	fns := of(tmpl, "AWS::Lambda::Function")
	require.Len(t, fns, len(expected))
	for id, f := range fns {
		groups := []any{own}
		if strings.HasPrefix(id, "AgentPayment") {
			groups = []any{paymentSG}
		}
		require.Equal(t, map[string]any{"SubnetIds": []any{subnetA, subnetB}, "SecurityGroupIds": groups}, f["VpcConfig"], id)
	}
	requireNetworkInterfaceUse(t, tmpl, slices.Collect(maps.Keys(expected)))
	require.Equal(t, map[string]any{"Value": own}, tmpl["Outputs"].(map[string]any)["FunctionsSecurityGroupId"])
	requireEndpoints(t, tmpl, []string{"dynamodb", "s3"}, []string{"sqs", "sns", "kms", "secretsmanager", "ssm", "xray"}, []any{own, paymentSG})
	requireQueueKeyUse(t, tmpl, keyArn(t, tmpl, "create"))
	requireNagClean(t, notes)
	requireCfnLintClean(t, path)
}

// With vpcFunctions naming one agent, that agent alone is in the VPC, in
// the subnets and security group agentNetworks gives it, and only its role
// may manage network interfaces; the others stay out. The stack makes the
// endpoints that agent needs and the VPC lacks (vpcExistingEndpoints=s3,
// no key, no SNS: no coordinator placed), and no security group of its own
// (none uses it).
func TestOnlyTheAgentsNamedAreInTheVPC(t *testing.T) {
	tmpl, notes, path := synthKMS(t, "", map[string]any{"workflows": authWorkflow(t),
		"vpcId": testVPC, "vpcSubnets": subnetA + "," + subnetB, "vpcRouteTables": routeTableA,
		"vpcFunctions": "payment", "agentNetworks": "payment=" + subnetOwn + "," + paymentSG, "vpcExistingEndpoints": "s3"})
	for id, f := range of(tmpl, "AWS::Lambda::Function") {
		if !strings.HasPrefix(id, "AgentPayment") {
			require.Nil(t, f["VpcConfig"], "%s stays out of the VPC", id)
			continue
		}
		require.Equal(t, map[string]any{"SubnetIds": []any{subnetOwn}, "SecurityGroupIds": []any{paymentSG}}, f["VpcConfig"], id)
	}
	requireNetworkInterfaceUse(t, tmpl, []string{"AgentPayment"})
	require.Empty(t, of(tmpl, "AWS::EC2::SecurityGroup")["FunctionsSecurityGroup"])
	require.NotContains(t, tmpl["Outputs"], "FunctionsSecurityGroupId")
	requireEndpoints(t, tmpl, []string{"dynamodb"}, []string{"sqs", "secretsmanager"}, []any{paymentSG})
	requireNagClean(t, notes)
	requireCfnLintClean(t, path)
}

// Without vpcId no function is in a VPC, and the stack makes no endpoint
// and no security group.
func TestNoNetworkWithoutAVPC(t *testing.T) {
	for id, f := range resources("AWS::Lambda::Function") {
		require.Nil(t, f["VpcConfig"], id)
	}
	require.Empty(t, resources("AWS::EC2::VPCEndpoint"))
	require.Empty(t, resources("AWS::EC2::SecurityGroup"))
}

// requireNetworkInterfaceUse asserts that the roles named (expected's keys),
// and no other, may manage network interfaces: what Lambda does in a VPC
// with a function's role (AWSLambdaVPCAccessExecutionRole's EC2 actions),
// the Describe actions on * (they take no resource), the others on the
// account's and region's EC2 resources.
func requireNetworkInterfaceUse(t *testing.T, tmpl map[string]any, roles []string) {
	t.Helper()
	want := []any{
		map[string]any{"Sid": "NetworkInterfaces", "Effect": "Allow",
			"Action":   []any{"ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"},
			"Resource": map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:*/*"}},
		map[string]any{"Sid": "NetworkInterfacesDescribe", "Effect": "Allow",
			"Action": []any{"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"}, "Resource": "*"},
	}
	for id, p := range of(tmpl, "AWS::IAM::Policy") {
		var got []any
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			if slices.ContainsFunc(asList(s.(map[string]any)["Action"]), func(a string) bool { return strings.HasPrefix(a, "ec2:") }) {
				got = append(got, s)
			}
		}
		if slices.Contains(roles, roleOf(id)) {
			require.Equal(t, want, got, id)
		} else {
			require.Empty(t, got, "%s: its function is not in the VPC", id)
		}
	}
	for id, r := range of(tmpl, "AWS::IAM::Role") {
		require.Nil(t, r["ManagedPolicyArns"], "%s: no managed policy (AWSLambdaVPCAccessExecutionRole)", id)
	}
}

// requireEndpoints asserts the template's VPC endpoints are these gateway
// and interface endpoints, in the test's VPC: the gateways on its route
// tables, the interfaces in its subnets with private DNS behind one
// security group that admits HTTPS from the functions' groups (sources)
// and nothing else, and lets nothing out; each endpoint's policy, the
// account's principals only.
func requireEndpoints(t *testing.T, tmpl map[string]any, gateways, interfaces []string, sources []any) {
	t.Helper()
	endpoints := of(tmpl, "AWS::EC2::VPCEndpoint")
	require.Len(t, endpoints, len(gateways)+len(interfaces))
	policy := map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Sid": "TheAccountsPrincipals", "Effect": "Allow", "Principal": "*", "Action": "*", "Resource": "*",
		"Condition": map[string]any{"StringEquals": map[string]any{"aws:PrincipalAccount": map[string]any{"Ref": "AWS::AccountId"}}},
	}}}
	for _, svc := range append(slices.Clone(gateways), interfaces...) {
		e := endpoints["Endpoint"+strings.ToUpper(svc[:1])+svc[1:]]
		require.NotNil(t, e, svc)
		require.Equal(t, testVPC, e["VpcId"], svc)
		require.Equal(t, map[string]any{"Fn::Sub": "com.amazonaws.${AWS::Region}." + svc}, e["ServiceName"], svc)
		require.Equal(t, policy, e["PolicyDocument"], svc)
		if slices.Contains(gateways, svc) {
			require.Equal(t, "Gateway", e["VpcEndpointType"], svc)
			require.NotEmpty(t, e["RouteTableIds"], svc)
			continue
		}
		require.Equal(t, "Interface", e["VpcEndpointType"], svc)
		require.Equal(t, true, e["PrivateDnsEnabled"], svc)
		require.Equal(t, []any{subnetA, subnetB}, e["SubnetIds"], svc)
		require.Equal(t, []any{map[string]any{"Fn::GetAtt": []any{"EndpointsSecurityGroup", "GroupId"}}}, e["SecurityGroupIds"], svc)
	}
	sg := of(tmpl, "AWS::EC2::SecurityGroup")["EndpointsSecurityGroup"]
	require.NotNil(t, sg)
	var from []any
	for _, in := range sg["SecurityGroupIngress"].([]any) {
		rule := in.(map[string]any)
		require.Equal(t, "tcp", rule["IpProtocol"])
		require.EqualValues(t, 443, rule["FromPort"])
		require.EqualValues(t, 443, rule["ToPort"])
		require.Nil(t, rule["CidrIp"], "from the functions' security groups only")
		from = append(from, rule["SourceSecurityGroupId"])
	}
	require.ElementsMatch(t, sources, from)
	egress, _ := json.Marshal(sg["SecurityGroupEgress"])
	require.Contains(t, string(egress), `"CidrIp":"255.255.255.255/32"`, "nothing out")
}

// requireCfnLintClean asserts cfn-lint finds nothing in a template file.
func requireCfnLintClean(t *testing.T, path string) {
	t.Helper()
	lint, err := exec.LookPath("cfn-lint")
	require.NoError(t, err, "cfn-lint is needed (pip install cfn-lint)")
	out, err := exec.Command(lint, "--format", "parseable", path).CombinedOutput()
	require.NoError(t, err, "cfn-lint findings:\n%s", out)
}
