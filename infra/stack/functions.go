package stack

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sas-go/sas/shared/agentmain"
	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Functions are the stack's Lambda functions.
type Functions struct {
	Submission, Scheduler, Supervisor awslambda.Function
	Agents                            map[string]awslambda.Function
}

// Memory: the handlers are I/O-bound Go; 256 MB buys the CPU share that keeps
// the DynamoDB and SQS calls of Submission, Scheduler and Supervisor quick,
// and Agents (which mostly wait on the remote service) need only 128 MB.
const (
	coordinatorMemory = topology.CoordinatorMemoryMB
	agentMemory       = topology.AgentMemoryMB
)

// fnSpec is one function to define.
type fnSpec struct {
	id, asset string
	memory    float64
	env       map[string]*string
	allow     []awsiam.PolicyStatement
	reserved  float64 // reserved concurrency; 0: none
	layer     awslambda.ILayerVersion
	key       awskms.IKey // the data's customer managed key (nil: AWS's own keys)
	bucket    awss3.IBucket
	payloads  payloadUse // what it does in bucket
	makesKeys bool       // it makes the orders' data keys (with sealData): Submission
	queues    queueUse   // the queues it sends to and takes its work from
	net       *network   // the VPC it may be placed in (nil: none)
	name      string     // its name in context vpcFunctions: submission, scheduler, supervisor or its agent's
	agent     bool       // it is an agent's (its network may be its own)
	publishes bool       // it publishes alerts to the topic (its key use through SNS)
}

func functions(st awscdk.Stack, p Props, r *Resources) *Functions {
	t := p.Topology
	layer, files := workflowLayer(st, p)
	env := environment(p, r, files)
	arn := func(name string) *string { return r.Queues[name].QueueArn() }
	stateARN := r.State.TableArn()
	f := &Functions{Agents: map[string]awslambda.Function{}}

	// Refusals go to the DLQ of the queue they came from; an event's recorded
	// outcome goes to the Scheduler.
	starts := []*string{arn(t.OrdersQueue().DLQName), arn(t.EventsQueue().DLQName), arn(t.SchedulerQueue().Name)}
	for _, a := range submissionAgents(p.Workflows) {
		starts = append(starts, arn(t.AgentRequests(a).Name))
	}
	submitting := submissionPayloads
	if p.SealData {
		submitting = sealingSubmissionPayloads
	}
	f.Submission = function(st, p, fnSpec{id: "Submission", asset: "submission", name: deployment.FunctionSubmission, net: r.net, memory: coordinatorMemory, env: env, layer: layer, key: r.Key,
		bucket: r.Payloads, payloads: submitting, makesKeys: p.SealData,
		allow: []awsiam.PolicyStatement{
			statement([]string{"dynamodb:PutItem", "dynamodb:GetItem"}, []*string{r.Orders.TableArn(), stateARN}), // an order, and a resent one's check
			// A cancel; an event recorded (its data a result) or kept; a first step that waits armed.
			statement([]string{"dynamodb:UpdateItem", "dynamodb:Query"}, []*string{stateARN}),
		},
		queues: queueUse{sends: starts, replies: replyQueueARNs(p), // it dispatches the first step, and a cancel's first undo
			takes: []awssqs.IQueue{r.Queues[t.OrdersQueue().Name], r.Queues[t.EventsQueue().Name]}, window: t.BatchWindow, concurrency: p.SubmissionConcurrency}})

	agentQueues := []*string{arn(t.SchedulerQueue().DLQName)}
	work := []awssqs.IQueue{r.Queues[t.SchedulerQueue().Name]} // and every agent's responses

	for _, a := range t.Agents {
		agentQueues = append(agentQueues, arn(t.AgentRequests(a).Name))
		work = append(work, r.Queues[t.AgentResponses(a).Name])
	}
	f.Scheduler = function(st, p, fnSpec{id: "Scheduler", asset: "scheduler", name: deployment.FunctionScheduler, net: r.net, memory: coordinatorMemory, env: env, layer: layer, key: r.Key,
		bucket: r.Payloads, payloads: readerPayloads, publishes: true,
		allow: []awsiam.PolicyStatement{
			// GetItem: an order of an older workflow version, an event's state; Query:
			// a timer's until over the results; PutItem: an event's data kept.
			statement([]string{"dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"}, []*string{stateARN}),
			statement([]string{"dynamodb:GetItem"}, []*string{r.Orders.TableArn()}), // the order, for a timer's until
			statement([]string{"sns:Publish"}, []*string{r.Alerts.TopicArn()}),
		},
		queues: queueUse{sends: agentQueues, replies: replyQueueARNs(p),
			takes: work, window: t.BatchWindow, concurrency: p.SchedulerConcurrency}})

	for _, a := range t.Agents {
		f.Agents[a] = agentFunction(st, p, r, a, env, layer)
	}

	waitQueues := []*string{arn(t.SchedulerQueue().Name)}
	for _, a := range t.Agents {
		waitQueues = append(waitQueues, arn(t.AgentRequests(a).Name), arn(t.AgentResponses(a).Name))
	}
	f.Supervisor = function(st, p, fnSpec{id: "Supervisor", asset: "supervisor", name: deployment.FunctionSupervisor, net: r.net, memory: coordinatorMemory, env: env, layer: layer, key: r.Key,
		bucket: r.Payloads, payloads: readerPayloads, publishes: true,
		reserved: 1, // one sweep at a time is enough for a minute's schedule; several would be safe
		allow: []awsiam.PolicyStatement{
			statement([]string{"dynamodb:Query"}, []*string{awscdk.Fn_Join(jsii.String(""),
				&[]*string{stateARN, jsii.String("/index/" + topology.DeadlineIndex)})}),
			statement([]string{"dynamodb:BatchGetItem", "dynamodb:UpdateItem"}, []*string{stateARN}),
			// The census of versions in flight: its item, and a version's
			// stored definition (its base).
			statement([]string{"dynamodb:GetItem"}, []*string{stateARN}),
			statement([]string{"sqs:GetQueueAttributes"}, waitQueues), // is a queue backlogged?
			statement([]string{"sns:Publish"}, []*string{r.Alerts.TopicArn()}),
		},
		queues: queueUse{sends: []*string{arn(t.SchedulerQueue().Name)}, replies: replyQueueARNs(p)}})
	rule := awsevents.NewRule(st, jsii.String("SupervisorSchedule"), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(p.SupervisorRate.Minutes()))),
	})
	rule.AddTarget(awseventstargets.NewLambdaFunction(f.Supervisor, nil))
	return f
}

// agentFunction is the Agent function of agent a: the HTTP agent, or a
// custom agent's own code (build/<agent>), allowed its claims, its replies,
// and its own credentials only.
func agentFunction(st awscdk.Stack, p Props, r *Resources, a string, env map[string]*string, layer awslambda.ILayerVersion) awslambda.Function {
	t := p.Topology
	arn := func(name string) *string { return r.Queues[name].QueueArn() }
	aenv := map[string]*string{agentmain.EnvAgentName: jsii.String(a)}
	for k, v := range env {
		aenv[k] = v
	}
	for k, v := range p.AgentVars[a] {
		aenv[k] = jsii.String(v)
	}
	spec := p.Agents[a]
	asset := "agent"
	if spec.Custom {
		asset = a
	}
	allow := []awsiam.PolicyStatement{
		// The claim that starts an attempt, the step's document (the results
		// before it), its result and the record of its outcome; the definition
		// an order of an older workflow version runs.
		statement([]string{"dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}, []*string{r.State.TableArn()}),
		statement([]string{"dynamodb:GetItem"}, []*string{r.Orders.TableArn()}), // the order, for a request without it
	}
	if s := credentialStatement(spec); s != nil {
		allow = append(allow, s)
	}
	if r.Key != nil && p.SealData && spec.PerKey != nil {
		allow = append(allow, keyNamesUse(r.Key, a)) // its keys named, not kept by value
	}
	return function(st, p, fnSpec{id: "Agent" + title(a), asset: asset, memory: float64(cmp.Or(spec.MemoryMB, agentMemory)), env: aenv, allow: allow, layer: layer,
		key: r.Key, bucket: r.Payloads, payloads: agentPayloads, name: a, agent: true, net: r.net,
		queues: queueUse{
			// Its replies, its rejects, and its own requests sent again, delayed,
			// when its flow control holds a call (a rate limit, a back-off, a pause).
			sends: []*string{arn(t.AgentResponses(a).Name), arn(t.AgentRequests(a).DLQName), arn(t.AgentRequests(a).Name)},
			takes: []awssqs.IQueue{r.Queues[t.AgentRequests(a).Name]}, window: t.BatchWindow,
			concurrency: p.agentConcurrency(a), // protects the remote service
		}})
}

// submissionAgents are the agents Submission sends to: each workflow's
// first step's, and every undo action's (a cancel's first undo).
func submissionAgents(set workflow.Set) []string {
	var out []string
	add := func(a string) {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, d := range set.Definitions() {
		add(d.Steps[0].Agent)
		for _, st := range d.Steps {
			if st.Undo != nil {
				add(st.Undo.Agent)
			}
		}
	}
	return out
}

// environment is what every function reads (shared/deployment.FromEnv).
func environment(p Props, r *Resources, files []string) map[string]*string {
	base := *queueURLBase()
	var replies []string
	for _, prefix := range p.ReplyQueuePrefixes {
		replies = append(replies, base+"/"+prefix)
	}
	s := p.Settings
	s.QueueURLBase, s.AlertTopicARN, s.WorkflowFiles, s.AllowedReplyQueues = base, *r.Alerts.TopicArn(), files, replies
	s.PayloadBucket = *r.Payloads.BucketName()
	s.RemoteBaseURL = "" // only the agents whose files name it get it (AgentVars)
	// The stack's key, whenever it has one: with sealData the functions
	// seal each new order under a data key it makes (SAS_SEAL_DATA), and
	// without it they still open what was sealed before it was turned off.
	s.DataKey = ""
	if r.Key != nil {
		s.DataKey = *r.Key.KeyArn()
	}
	out := map[string]*string{}
	for k, v := range s.Env() {
		out[k] = jsii.String(v)
	}
	return out
}

// withMemoryLimit is env with GOMEMLIMIT at four fifths of the function's
// memory (MB): Go's collector then works harder as the heap nears it, where
// by default it lets the heap grow to twice what is live, and an Agent
// reading a 16 MB order and a 16 MB result before it (their document 32 MB)
// would be stopped at 128 MB (Lambda runs no GOMEMLIMIT of its own).
func withMemoryLimit(env map[string]*string, memoryMB float64) *map[string]*string {
	out := maps.Clone(env)
	out["GOMEMLIMIT"] = jsii.String(fmt.Sprintf("%dMiB", int(memoryMB*4/5)))
	return &out
}

// replyQueueARNs are the queues orders may name for status messages.
func replyQueueARNs(p Props) []*string {
	var out []*string
	for _, prefix := range p.ReplyQueuePrefixes {
		out = append(out, awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:"+prefix+"*"), nil))
	}
	return out
}

func statement(actions []string, resources []*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: jsii.Strings(actions...), Resources: &resources})
}

// function defines a Go function on provided.al2023/arm64 with its own log
// group and a role allowed only what spec says (and to write its logs).
func function(st awscdk.Stack, p Props, spec fnSpec) awslambda.Function {
	logs := awslogs.NewLogGroup(st, jsii.String(spec.id+"Logs"), &awslogs.LogGroupProps{
		Retention: awslogs.RetentionDays_ONE_MONTH, RemovalPolicy: awscdk.RemovalPolicy_DESTROY, EncryptionKey: spec.key,
	})
	role := awsiam.NewRole(st, jsii.String(spec.id+"Role"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
	})
	role.AddToPolicy(statement([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, []*string{logs.LogGroupArn()}))
	for _, s := range append(spec.allow, spec.payloads.statements(spec.bucket)...) {
		role.AddToPolicy(s)
	}
	if spec.key != nil {
		role.AddToPolicy(keyUse(spec.key, spec.publishes))
		role.AddToPolicy(spec.payloads.keyUse(spec.key))
		// Whenever there is a key, not only with sealData: an order sealed
		// before sealData was turned off is opened, and what is made of it
		// sealed under its data key, until it ends.
		role.AddToPolicy(sealUse(spec.key, spec.makesKeys))
	}
	props := &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(p.AssetDir, spec.asset)), nil),
		MemorySize:   jsii.Number(spec.memory),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(p.Topology.FunctionTimeout.Seconds())),
		Environment:  withMemoryLimit(spec.env, spec.memory),
		Role:         role,
		LogGroup:     logs,
		Description:  jsii.String("Scheduler-Agent-Supervisor: " + spec.id),
	}
	if spec.reserved > 0 {
		props.ReservedConcurrentExecutions = jsii.Number(spec.reserved)
	}
	var layers []awslambda.ILayerVersion
	if spec.layer != nil {
		layers = append(layers, spec.layer)
	}
	if p.OTLPHeadersSecret != "" && p.Tracing != "off" {
		// The collector's headers (an API key), read at the function's start.
		role.AddToPolicy(statement([]string{"secretsmanager:GetSecretValue"}, []*string{secretARN(p.OTLPHeadersSecret)}))
	}
	if p.Tracing == "otlp" && p.ADOTLayerARN != "" {
		// One trace per order (shared/tracing): the ADOT layer's collector
		// takes the spans on localhost:4318 (unless otlpEndpoint names
		// another collector) and sends them to X-Ray.
		layers = append(layers, awslambda.LayerVersion_FromLayerVersionArn(st, jsii.String(spec.id+"Adot"), jsii.String(p.ADOTLayerARN)))
		props.Tracing = awslambda.Tracing_ACTIVE
		role.AddToPolicy(statement([]string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, []*string{jsii.String("*")}))
		cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
			Id:        jsii.String("AwsSolutions-IAM5"),
			Reason:    jsii.String("xray:PutTraceSegments and xray:PutTelemetryRecords support no resource (*): the ADOT layer's collector sends the function's spans to X-Ray."),
			AppliesTo: &[]interface{}{jsii.String("Resource::*")},
		}}, jsii.Bool(true))
	}
	if len(layers) > 0 {
		props.Layers = &layers
	}
	fn := awslambda.NewFunction(st, jsii.String(spec.id), props)
	spec.queues.wire(fn, role, spec.key)
	spec.net.place(fn, role, spec.name, spec.agent)
	// CDK makes the function depend on its role and the role's policy; the
	// role is already implied by Fn::GetAtt (cfn-lint W3005), so keep only the
	// policy, which must exist before the function can use its permissions.
	policy := role.Node().TryFindChild(jsii.String("DefaultPolicy")).(awsiam.Policy)
	cfnPolicy := policy.Node().DefaultChild().(awscdk.CfnResource)
	fn.Node().DefaultChild().(awscdk.CfnResource).AddOverride(jsii.String("DependsOn"),
		[]*string{st.GetLogicalId(cfnPolicy)})
	return fn
}

// agentConcurrency is agent a's mapping's MaximumConcurrency: its workflow
// file's concurrency, or context agentConcurrency.
func (p Props) agentConcurrency(a string) int {
	if n := p.Agents[a].Concurrency; n > 0 {
		return n
	}
	return p.AgentConcurrency
}

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// secretARN is the ARN of the secret named name (or name, an ARN already):
// Secrets Manager adds six characters to a name in its ARN.
func secretARN(name string) *string {
	if strings.HasPrefix(name, "arn:") {
		return jsii.String(name)
	}
	return awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:"+name+"-??????"), nil)
}
