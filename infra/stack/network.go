package stack

import (
	"maps"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sas-go/sas/shared/deployment"
)

// network places the functions the settings name in the customer's VPC
// (deployment.Network), by ids alone, so that synth needs no account
// (Vpc.fromLookup would ask it for the VPC's subnets). CDK's VPC constructs
// are not used: Vpc_FromVpcAttributes, Lambda's VPC props and the interface
// endpoint construct want the subnets' Availability Zones at synth, and
// Lambda's attaches the managed policy AWSLambdaVPCAccessExecutionRole. A
// function's VpcConfig is set on its CloudFormation resource instead, and
// its role allowed what Lambda does with it (networkInterfaceUse); the
// security groups and endpoints are CloudFormation's resources too.
type network struct {
	st      awscdk.Stack
	n       deployment.Network
	own     awsec2.CfnSecurityGroup // the functions' security group the stack makes, when one needs it
	sources map[string]*string      // every security group of a function placed: the endpoints admit them
	placed  []string                // the functions placed, by name
}

// newNetwork is the stack's network, or nil: no VPC, no function placed.
func newNetwork(st awscdk.Stack, n deployment.Network) *network {
	if n.VPCID == "" {
		return nil
	}
	return &network{st: st, n: n, sources: map[string]*string{}}
}

// place puts the function of a name (an agent's, or a coordinator's) in
// its subnets with its security groups, if the settings place it, and lets
// its role manage the network interfaces Lambda makes for it there. Its
// role's policy, which the function depends on, then holds them when
// Lambda creates the function, and until it is deleted.
func (n *network) place(fn awslambda.Function, role awsiam.Role, name string, agent bool) {
	if n == nil || !n.n.Placed(name) {
		return
	}
	subnets, groups := n.n.Of(name, agent)
	ids := jsii.Strings(groups...)
	if len(groups) == 0 {
		ids = &[]*string{n.ownGroup().AttrGroupId()}
	}
	for _, id := range *ids {
		n.sources[*id] = id
	}
	fn.Node().DefaultChild().(awslambda.CfnFunction).SetVpcConfig(&awslambda.CfnFunction_VpcConfigProperty{
		SubnetIds: jsii.Strings(subnets...), SecurityGroupIds: ids,
	})
	for _, s := range networkInterfaceUse() {
		role.AddToPolicy(s)
	}
	cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Lambda makes a function's network interfaces in its VPC with its role: ec2:DescribeNetworkInterfaces and " +
			"ec2:DescribeSubnets support no resource (*), and the interfaces' other actions are on the account's and region's EC2 " +
			"resources (ec2:REGION:ACCOUNT:*/*), as Lambda's documentation asks for ec2:DeleteNetworkInterface."),
		AppliesTo: &[]interface{}{
			jsii.String("Resource::*"),
			jsii.String("Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:*/*"),
		},
	}}, jsii.Bool(true))
	n.placed = append(n.placed, name)
}

// ownGroup is the functions' security group the stack makes: everything
// out (the agents' services, the endpoints), nothing in (Lambda takes no
// connection); its id is the output FunctionsSecurityGroupId, for the
// services and existing endpoints that must admit it.
func (n *network) ownGroup() awsec2.CfnSecurityGroup {
	if n.own == nil {
		n.own = awsec2.NewCfnSecurityGroup(n.st, jsii.String("FunctionsSecurityGroup"), &awsec2.CfnSecurityGroupProps{
			VpcId:            jsii.String(n.n.VPCID),
			GroupDescription: jsii.String("Scheduler-Agent-Supervisor functions: all out, nothing in"),
			SecurityGroupEgress: []any{&awsec2.CfnSecurityGroup_EgressProperty{
				IpProtocol: jsii.String("-1"), CidrIp: jsii.String("0.0.0.0/0"), Description: jsii.String("the agents' services and the VPC endpoints"),
			}},
		})
		awscdk.NewCfnOutput(n.st, jsii.String("FunctionsSecurityGroupId"), &awscdk.CfnOutputProps{Value: n.own.AttrGroupId()})
	}
	return n.own
}

// networkInterfaceUse is what Lambda needs of a function's role to make,
// find and delete the function's network interfaces in its VPC (the
// actions of AWSLambdaVPCAccessExecutionRole, but the logs', which each
// role has for its own log group): the Describe actions take no resource;
// the others, on the account's and region's EC2 resources, as Lambda's
// documentation writes for ec2:DeleteNetworkInterface.
func networkInterfaceUse() []awsiam.PolicyStatement {
	return []awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("NetworkInterfaces"),
			Actions:   jsii.Strings("ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"),
			Resources: &[]*string{awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:*/*"), nil)},
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("NetworkInterfacesDescribe"),
			Actions:   jsii.Strings("ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"),
			Resources: jsii.Strings("*"),
		}),
	}
}

// endpoints makes the VPC endpoints the functions placed need and the VPC
// lacks (context vpcExistingEndpoints): DynamoDB's and S3's gateway
// endpoints on the subnets' route tables, and an interface endpoint, with
// private DNS, in the subnets for each other service they call
// (interfaceServices), behind a security group that admits HTTPS from the
// functions' security groups alone. Each endpoint's policy lets through
// the account's own principals only.
func (n *network) endpoints(p Props, r *Resources) {
	if n == nil || len(n.placed) == 0 {
		return
	}
	for _, svc := range []string{"dynamodb", "s3"} {
		if !n.n.Exists(svc) {
			awsec2.NewCfnVPCEndpoint(n.st, jsii.String("Endpoint"+title(svc)), &awsec2.CfnVPCEndpointProps{
				VpcId: jsii.String(n.n.VPCID), ServiceName: endpointService(svc), VpcEndpointType: jsii.String("Gateway"),
				RouteTableIds: anys(n.n.RouteTables), PolicyDocument: accountOnly(),
			})
		}
	}
	var services []string
	for _, svc := range interfaceServices(p, r, n.placed) {
		if !n.n.Exists(svc) {
			services = append(services, svc)
		}
	}
	if len(services) == 0 {
		return
	}
	var ingress []any
	for _, k := range slices.Sorted(maps.Keys(n.sources)) {
		ingress = append(ingress, &awsec2.CfnSecurityGroup_IngressProperty{
			IpProtocol: jsii.String("tcp"), FromPort: jsii.Number(443), ToPort: jsii.Number(443),
			SourceSecurityGroupId: n.sources[k], Description: jsii.String("HTTPS from the functions"),
		})
	}
	sg := awsec2.NewCfnSecurityGroup(n.st, jsii.String("EndpointsSecurityGroup"), &awsec2.CfnSecurityGroupProps{
		VpcId:                jsii.String(n.n.VPCID),
		GroupDescription:     jsii.String("Scheduler-Agent-Supervisor VPC endpoints: HTTPS from the functions security groups"),
		SecurityGroupIngress: ingress,
		// Nothing out (an endpoint answers on the connection it took): a
		// rule that matches no traffic replaces EC2's default all-out one,
		// as CDK's SecurityGroup does with allowAllOutbound false.
		SecurityGroupEgress: []any{&awsec2.CfnSecurityGroup_EgressProperty{
			IpProtocol: jsii.String("icmp"), FromPort: jsii.Number(252), ToPort: jsii.Number(86),
			CidrIp: jsii.String("255.255.255.255/32"), Description: jsii.String("no traffic out"),
		}},
	})
	for _, svc := range services {
		awsec2.NewCfnVPCEndpoint(n.st, jsii.String("Endpoint"+title(svc)), &awsec2.CfnVPCEndpointProps{
			VpcId: jsii.String(n.n.VPCID), ServiceName: endpointService(svc), VpcEndpointType: jsii.String("Interface"),
			SubnetIds: anys(n.n.Subnets), SecurityGroupIds: &[]interface{}{sg.AttrGroupId()},
			PrivateDnsEnabled: jsii.Bool(true), PolicyDocument: accountOnly(),
		})
	}
}

// interfaceServices are the services whose interface endpoints the
// functions placed call: SQS (every function sends), SNS (the Scheduler's
// and the Supervisor's alerts), KMS with a key (the functions open sealed
// data themselves; the services' own use of the key is theirs, outside the
// VPC), Secrets Manager (the OTLP headers' secret, an agent's secret), SSM
// (an agent's parameter), X-Ray (the ADOT layer's collector exports to
// it). CloudWatch Logs is not one: Lambda takes a function's output (its
// logs and EMF metrics) and delivers it itself, from outside the VPC.
func interfaceServices(p Props, r *Resources, placed []string) []string {
	has := func(name string) bool { return slices.Contains(placed, name) }
	var secret, parameter bool
	for _, a := range placed {
		if auth := p.Agents[a].Auth; auth != nil {
			secret, parameter = secret || auth.Secret != "", parameter || auth.Parameter != ""
		}
	}
	out := []string{"sqs"}
	for svc, needed := range map[string]bool{
		"sns":            has(deployment.FunctionScheduler) || has(deployment.FunctionSupervisor),
		"kms":            r.Key != nil,
		"secretsmanager": secret || (p.OTLPHeadersSecret != "" && p.Tracing != "off"), // as function grants it
		"ssm":            parameter,
		"xray":           p.Tracing == "otlp" && p.ADOTLayerARN != "",
	} {
		if needed {
			out = append(out, svc)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		return slices.Index(deployment.EndpointServices, a) - slices.Index(deployment.EndpointServices, b)
	})
	return out
}

// endpointService is a service's endpoint service name in the stack's
// region.
func endpointService(svc string) *string {
	return awscdk.Fn_Sub(jsii.String("com.amazonaws.${AWS::Region}."+svc), nil)
}

// accountOnly is an endpoint's policy: anything, by the account's own
// principals only (a stranger's credentials do not pass through it).
func accountOnly() map[string]any {
	return map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Sid": "TheAccountsPrincipals", "Effect": "Allow", "Principal": "*", "Action": "*", "Resource": "*",
		"Condition": map[string]any{"StringEquals": map[string]any{"aws:PrincipalAccount": awscdk.Aws_ACCOUNT_ID()}},
	}}}
}

func anys(ss []string) *[]interface{} {
	out := []interface{}{}
	for _, s := range ss {
		out = append(out, s)
	}
	return &out
}
