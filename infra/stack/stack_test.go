package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/infra/stack"
	"github.com/sas-go/sas/shared/topology"
)

var (
	props    stack.Props
	tmpl     map[string]any // the synthesized template
	template assertions.Template
	notes    assertions.Annotations
	tmplPath string
)

// TestMain synthesizes the stack once (jsii is slow to start) with every
// optional feature on: an alarm email and allowed reply queues.
func TestMain(m *testing.M) {
	os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	root, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	if err := ensureAssets(root); err != nil {
		fmt.Fprintln(os.Stderr, "infra tests:", err)
		os.Exit(1)
	}
	out, err := os.MkdirTemp("", "sas-synth-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(out)
		defer jsii.Close()
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out), Context: &map[string]any{
			"prefix": "shop", "alarmEmail": "ops@example.com",
			"allowedReplyQueuePrefixes": "shop-client-", "assetDir": filepath.Join(root, "build"),
			"eventSenders": "111122223333,arn:aws:iam::111122223333:role/payments-webhook",
		}})
		if props, err = stack.Config(app); err != nil {
			fmt.Fprintln(os.Stderr, "infra tests:", err)
			return 1
		}
		st := stack.New(app, "shop-pipeline", props, nil)
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(nil), nil)
		template = assertions.Template_FromStack(st, nil)
		notes = assertions.Annotations_FromStack(st)
		b, _ := json.Marshal(template.ToJSON())
		_ = json.Unmarshal(b, &tmpl)
		tmplPath = filepath.Join(out, "template.json")
		_ = os.WriteFile(tmplPath, b, 0o644)
		return m.Run()
	}()
	os.Exit(code)
}

// ensureAssets builds the Lambda assets if make build has not.
func ensureAssets(root string) error {
	for _, fn := range []string{"submission", "scheduler", "agent", "supervisor", "loyalty"} {
		if _, err := os.Stat(filepath.Join(root, "build", fn, "bootstrap")); err != nil {
			cmd := exec.Command("make", "build")
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("make build: %w\n%s", err, out)
			}
			return nil
		}
	}
	return nil
}

// jsiiOK turns a failed jsii assertion (a panic) into a test failure.
func jsiiOK(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%v", r)
		}
	}()
	f()
}

// resources returns the template's resources of a type, by logical id.
func resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tmpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			props, _ := res["Properties"].(map[string]any)
			out[id] = props
		}
	}
	return out
}

func TestFunctionsAreGoOnGraviton(t *testing.T) {
	fns := resources("AWS::Lambda::Function")
	require.Len(t, fns, 6, "submission, scheduler, supervisor and one agent per remote service")
	for id, f := range fns {
		require.Equal(t, "provided.al2023", f["Runtime"], id)
		require.Equal(t, []any{"arm64"}, f["Architectures"], id)
		require.Equal(t, "bootstrap", f["Handler"], id)
		require.EqualValues(t, 30, f["Timeout"], id)
		require.Contains(t, []any{128.0, 256.0}, f["MemorySize"], id)
		require.NotNil(t, f["LoggingConfig"], "%s logs to its own log group", id)
	}
	jsiiOK(t, func() {
		template.ResourceCountIs(jsii.String("AWS::Logs::LogGroup"), jsii.Number(6))
	})
}

func TestEventSourceMappings(t *testing.T) {
	esms := resources("AWS::Lambda::EventSourceMapping")
	require.Len(t, esms, 9, "orders, events, scheduler, 3 response and 3 request queues")
	for id, e := range esms {
		require.EqualValues(t, 10, e["BatchSize"], id)
		require.Equal(t, []any{"ReportBatchItemFailures"}, e["FunctionResponseTypes"], id)
		sc := e["ScalingConfig"].(map[string]any)
		require.Contains(t, []any{20.0, 50.0}, sc["MaximumConcurrency"], id)
		require.EqualValues(t, topology.DefaultBatchWindow.Seconds(), e["MaximumBatchingWindowInSeconds"],
			"%s waits the default window to fill its batch", id)
	}
}

func TestQueuesHaveDLQsVisibilityAndEncryption(t *testing.T) {
	queues := resources("AWS::SQS::Queue")
	require.Len(t, queues, 19, "9 queues, their DLQs, and the alert inbox")
	byName := map[string]map[string]any{}
	for _, q := range queues {
		byName[q["QueueName"].(string)] = q
		require.Equal(t, true, q["SqsManagedSseEnabled"])
	}
	for _, q := range props.Topology.Queues() {
		work, dlq := byName[q.Name], byName[q.DLQName]
		require.NotNil(t, work, q.Name)
		require.NotNil(t, dlq, q.DLQName)
		require.EqualValues(t, 6*30, work["VisibilityTimeout"], "%s: six times its consumer's timeout", q.Name)
		rp := work["RedrivePolicy"].(map[string]any)
		require.EqualValues(t, 5, rp["maxReceiveCount"], q.Name)
		require.NotNil(t, rp["deadLetterTargetArn"])
		require.Nil(t, dlq["RedrivePolicy"])
		require.EqualValues(t, 14*24*3600, dlq["MessageRetentionPeriod"])
		// A message its queue took at its largest, refused to its DLQ with
		// its RejectReason and SourceQueue, fits (SQS's default was 256 KiB
		// for both: a body at it no longer fitted with its reason).
		require.EqualValues(t, 256<<10, work["MaximumMessageSize"], q.Name)
		require.EqualValues(t, 1<<20, dlq["MaximumMessageSize"], q.DLQName)
	}
	inbox := byName[props.Topology.AlertInbox()]
	require.NotNil(t, inbox, "the alert inbox")
	require.EqualValues(t, 14*24*3600, inbox["MessageRetentionPeriod"])
	var inboxSubs int
	for _, s := range resources("AWS::SNS::Subscription") {
		if s["Protocol"] == "sqs" {
			inboxSubs++
			require.Equal(t, true, s["RawMessageDelivery"])
			require.Contains(t, fmt.Sprint(s["TopicArn"]), "AlertTopic")
		}
	}
	require.Equal(t, 1, inboxSubs, "the inbox is subscribed to the alert topic")
	policies := resources("AWS::SQS::QueuePolicy")
	require.Len(t, policies, 19, "every queue refuses non-TLS requests")
	for _, p := range policies {
		b, _ := json.Marshal(p)
		require.Contains(t, string(b), `"aws:SecureTransport":"false"`)
	}
}

// The events queue's policy lets the principals of context eventSenders
// send to it, and only send; no other queue's policy names them.
func TestTheEventsQueueHasItsOwnSenders(t *testing.T) {
	var senders []string
	for id, p := range resources("AWS::SQS::QueuePolicy") {
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			if st["Sid"] != "EventSenders" {
				continue
			}
			queues, _ := json.Marshal(p["Queues"])
			require.Contains(t, string(queues), "shopevents", id)
			require.NotContains(t, string(queues), "dlq", id)
			require.Equal(t, []string{"sqs:SendMessage"}, asList(st["Action"]))
			senders = append(senders, asList(st["Principal"].(map[string]any)["AWS"])...)
		}
	}
	require.Len(t, senders, 2, "the account and the role named, once")
	require.Contains(t, strings.Join(senders, " "), "arn:aws:iam::111122223333:role/payments-webhook")
	require.Contains(t, strings.Join(senders, " "), "111122223333:root")
}

func TestTables(t *testing.T) {
	tables := resources("AWS::DynamoDB::Table")
	require.Len(t, tables, 2)
	byName := map[string]map[string]any{}
	for _, tb := range tables {
		byName[tb["TableName"].(string)] = tb
		require.Equal(t, "PAY_PER_REQUEST", tb["BillingMode"])
		require.Equal(t, map[string]any{"PointInTimeRecoveryEnabled": true}, tb["PointInTimeRecoverySpecification"])
		require.Equal(t, map[string]any{"SSEEnabled": true}, tb["SSESpecification"])
	}
	state := byName[props.Topology.StateTable()]
	require.NotNil(t, state)
	require.NotNil(t, byName[props.Topology.OrdersTable()])
	indexes := map[string]map[string]any{}
	for _, g := range state["GlobalSecondaryIndexes"].([]any) {
		indexes[g.(map[string]any)["IndexName"].(string)] = g.(map[string]any)
	}
	require.Len(t, indexes, 2, "the deadline index and the end index")
	for name, keys := range map[string][2]string{
		topology.DeadlineIndex: {topology.KeyDueShard, topology.KeyDueAt},
		topology.EndIndex:      {topology.KeyEndShard, topology.KeyEndedAt},
	} {
		gsi := indexes[name]
		require.NotNil(t, gsi, name)
		require.Equal(t, []any{
			map[string]any{"AttributeName": keys[0], "KeyType": "HASH"},
			map[string]any{"AttributeName": keys[1], "KeyType": "RANGE"},
		}, gsi["KeySchema"], name)
		proj := gsi["Projection"].(map[string]any)
		require.Equal(t, "KEYS_ONLY", proj["ProjectionType"], "%s: no index write when a record changes", name)
	}
}

func TestSupervisorScheduleAndConcurrency(t *testing.T) {
	rules := resources("AWS::Events::Rule")
	require.Len(t, rules, 1)
	for _, r := range rules {
		require.Equal(t, "rate(1 minute)", r["ScheduleExpression"])
		target := r["Targets"].([]any)[0].(map[string]any)
		require.Contains(t, fmt.Sprint(target["Arn"]), "Supervisor")
	}
	reserved := 0
	for id, f := range resources("AWS::Lambda::Function") {
		if f["ReservedConcurrentExecutions"] != nil {
			require.Contains(t, id, "Supervisor")
			require.EqualValues(t, 1, f["ReservedConcurrentExecutions"])
			reserved++
		}
	}
	require.Equal(t, 1, reserved)
}

func TestAlarmsNotifyTheAlarmTopic(t *testing.T) {
	alarms := resources("AWS::CloudWatch::Alarm")
	require.Len(t, alarms, 5+2*9+len(props.Workflows.Names()), "step errors, compensation failures, queue wait, supervisor errors, orders of undeployed versions; per queue: DLQ not empty, oldest message; per workflow: its failure rate")
	var names []string
	for id, a := range alarms {
		names = append(names, id)
		actions := fmt.Sprint(a["AlarmActions"])
		require.Contains(t, actions, "AlarmTopic", id)
	}
	b, _ := json.Marshal(tmpl)
	require.Contains(t, string(b), `"Namespace":"SchedulerAgentSupervisor"`, "the EMF metric is alarmed on")
	require.True(t, slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "StepErrorsAlarm") }))
	wait := alarms[names[slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "QueueWaitAlarm") })]]
	require.EqualValues(t, 5*60*1000, wait["Threshold"], "five minutes from ready to claimed, in milliseconds")
	require.Contains(t, fmt.Sprint(wait["Metrics"]), `QueueWait`)
	require.Contains(t, fmt.Sprint(wait["Metrics"]), `MAX([`, "the longest wait of any agent's claims")
	var emails int
	for _, s := range resources("AWS::SNS::Subscription") {
		if s["Protocol"] == "email" {
			emails++
			require.Equal(t, "ops@example.com", s["Endpoint"])
		}
	}
	require.Equal(t, 2, emails, "the alarm email on both topics")
	require.Len(t, resources("AWS::CloudWatch::Dashboard"), 1)
}

// The census's alarm watches the largest count of orders of undeployed
// versions the Supervisor reported, alarms at one, keeps its state while no
// count comes (the census reports once a period), and says when it clears.
func TestOrdersOfUndeployedVersionsAlarm(t *testing.T) {
	var a map[string]any
	for id, props := range resources("AWS::CloudWatch::Alarm") {
		if strings.HasPrefix(id, "OrdersOfUndeployedVersionsAlarm") {
			a = props
		}
	}
	require.NotNil(t, a, "the alarm")
	require.Equal(t, "OrdersOfUndeployedVersions", a["MetricName"])
	require.Equal(t, "SchedulerAgentSupervisor", a["Namespace"])
	require.Contains(t, fmt.Sprint(a["Dimensions"]), "supervisor", "the Supervisor's series (all workflows)")
	require.Equal(t, "Maximum", a["Statistic"])
	require.EqualValues(t, 1, a["Threshold"])
	require.Equal(t, "GreaterThanOrEqualToThreshold", a["ComparisonOperator"])
	require.Equal(t, "ignore", a["TreatMissingData"], "no count between two passes keeps the state")
	require.Contains(t, fmt.Sprint(a["AlarmActions"]), "AlarmTopic")
	require.Contains(t, fmt.Sprint(a["OKActions"]), "AlarmTopic", "the operator is told when it clears")
	require.Contains(t, fmt.Sprint(a["AlarmDescription"]), "sasctl migrate")
}

// expected is what each function's role may do (besides writing its logs).
// (Their S3 grants' resources: expectedS3.)
var expected = map[string][]string{
	"Submission":     {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem", "s3:GetObject", "s3:ListBucket", "s3:PutObject", "sqs:SendMessage"},
	"Scheduler":      {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem", "s3:GetObject", "s3:ListBucket", "sns:Publish", "sqs:SendMessage"},
	"Supervisor":     {"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem", "s3:GetObject", "s3:ListBucket", "sns:Publish", "sqs:GetQueueAttributes", "sqs:SendMessage"},
	"AgentInventory": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem", "s3:GetObject", "s3:ListBucket", "s3:PutObject", "sqs:SendMessage"},
	"AgentPayment":   {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem", "s3:GetObject", "s3:ListBucket", "s3:PutObject", "sqs:SendMessage"},
	"AgentShipping":  {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem", "s3:GetObject", "s3:ListBucket", "s3:PutObject", "sqs:SendMessage"},
}

// roleOf is the function (a key of expected) whose role a policy's
// logical id is, or "".
func roleOf(policyID string) string {
	for r := range expected {
		if strings.HasPrefix(policyID, r+"Role") {
			return r
		}
	}
	return ""
}

var consume = []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}

func TestIAMIsLeastPrivilege(t *testing.T) {
	policies := resources("AWS::IAM::Policy")
	require.Len(t, policies, len(expected))
	for id, p := range policies {
		role := roleOf(id)
		require.NotEmpty(t, role, "policy %s belongs to a function role", id)
		var actions []string
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			require.Equal(t, "Allow", st["Effect"])
			for _, a := range asList(st["Action"]) {
				require.NotContains(t, a, "*", "%s: no wildcard actions", id)
				actions = append(actions, a)
			}
			for _, r := range asList(st["Resource"]) {
				require.NotEqual(t, "*", r, "%s: no wildcard resources", id)
			}
			if slices.Contains(asList(st["Action"]), "dynamodb:Query") && role == "Supervisor" {
				require.Contains(t, fmt.Sprint(st["Resource"]), "/index/"+topology.DeadlineIndex, "the Supervisor queries only the deadline index")
			}
			if slices.Contains(asList(st["Action"]), "dynamodb:Query") && role != "Supervisor" {
				require.NotContains(t, fmt.Sprint(st["Resource"]), "/index/", "the others query an order's results, never the index")
			}
		}
		slices.Sort(actions)
		actions = slices.Compact(actions)
		want := append([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, expected[role]...)
		if role != "Supervisor" {
			want = append(want, consume...)
		}
		slices.Sort(want)
		require.Equal(t, want, actions, role)
	}
	for id, r := range resources("AWS::IAM::Role") {
		require.Nil(t, r["ManagedPolicyArns"], "%s: no managed policies", id)
	}
}

func asList(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			b, _ := json.Marshal(e)
			s := string(b)
			if str, ok := e.(string); ok {
				s = str
			}
			out = append(out, s)
		}
		return out
	}
	b, _ := json.Marshal(v)
	return []string{string(b)}
}

func TestFunctionsAreConfiguredWithTheTopology(t *testing.T) {
	for id, f := range resources("AWS::Lambda::Function") {
		env := f["Environment"].(map[string]any)["Variables"].(map[string]any)
		require.Equal(t, "shop", env["SAS_PREFIX"], id)
		require.Equal(t, "inventory,payment,shipping", env["SAS_AGENTS"], id)
		require.Nil(t, env["SAS_STEP_TIMEOUT"], "%s: no override: the workflow's own", id)
		require.Nil(t, env["SAS_WORKFLOWS"], "%s: no file: the example order workflow, built in", id)
		require.Equal(t, "10", env["SAS_BACKLOG_DEPTH"], id)
		require.Contains(t, fmt.Sprint(env["SAS_QUEUE_URL_BASE"]), "https://sqs.${AWS::Region}.${AWS::URLSuffix}/${AWS::AccountId}")
		require.Contains(t, fmt.Sprint(env["SAS_ALLOWED_REPLY_QUEUES"]), "/shop-client-")
		require.Contains(t, fmt.Sprint(env["SAS_ALERT_TOPIC_ARN"]), "AlertTopic")
		if strings.HasPrefix(id, "Agent") {
			require.Equal(t, strings.ToLower(strings.TrimPrefix(id, "Agent")[:len(env["SAS_AGENT_NAME"].(string))]), env["SAS_AGENT_NAME"])
		}
	}
	outputs := tmpl["Outputs"].(map[string]any)
	for _, k := range []string{"Prefix", "OrdersQueueUrl", "EventsQueueUrl", "OrdersTableName", "StateTableName", "AlertTopicArn", "AlarmTopicArn", "QueueUrlBase",
		"PayloadBucketName"} {
		require.Contains(t, outputs, k)
	}
}

func TestNoUnsuppressedNagFindings(t *testing.T) { requireNagClean(t, notes) }

// requireNagClean asserts cdk-nag's AwsSolutions pack found nothing that is
// not suppressed with its reason.
func requireNagClean(t *testing.T, notes assertions.Annotations) {
	t.Helper()
	jsiiOK(t, func() {
		errs := notes.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		warns := notes.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		var msgs []string
		for _, m := range append(*errs, *warns...) {
			msgs = append(msgs, fmt.Sprint(*m.Id, ": ", m.Entry.Data))
		}
		require.Empty(t, msgs)
	})
}

func TestCfnLintIsClean(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	require.NoError(t, err, "cfn-lint is needed (pip install cfn-lint)")
	out, err := exec.Command(lint, "--format", "parseable", tmplPath).CombinedOutput()
	require.NoError(t, err, "cfn-lint findings:\n%s", out)
}

func TestConfigRefusesBadContext(t *testing.T) {
	for ctx, bad := range map[string]struct{ value, want string }{
		"stepTimeout": {"1m", `workflow "order": step "reserve-inventory"'s timeout 1m0s is longer than its agent function allows ` +
			`(25s: its timeout 30s less 5s) (context stepTimeout overrides every step's)`},
		"supervisorRate":        {"90s", "context supervisorRate=1m30s: an EventBridge schedule is whole minutes, at least 1m"},
		"maxFailures":           {"many", `context maxFailures="many": "many" is not a whole number`},
		"workflows":             {"saga.yaml", "context workflows:\nworkflow file: open saga.yaml: no such file or directory"},
		"batchWindowSeconds":    {"360", `context batchWindowSeconds="360": a whole number of seconds from 0 to 300, not "360"`},
		"orderDeadline":         {"a day", `context orderDeadline="a day": "a day" is not a duration like 30s, 5m or 24h`},
		"backlogDepth":          {"0", `context backlogDepth="0": must be from 1 to 1000000, not 0`},
		"queueWaitAlarm":        {"30s", `context queueWaitAlarm="30s": must be at least 1m, not 30s`},
		"prefix":                {"my shop", `context prefix="my shop": "my shop" is not 1-32 letters, digits, - or _, starting with a letter`},
		"remoteBaseUrl":         {"remote.example.com", `context remoteBaseUrl="remote.example.com": "remote.example.com" is not an http(s) URL`},
		"supervisorRateMinutes": {"5", "context supervisorRateMinutes is now supervisorRate (a duration such as 5m)"},
		"kms":                   {"alias/shop", `context kms="alias/shop": "alias/shop" is not create, or a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)`},
		"vpcSubnets":            {"subnet-0a000001", "context vpcSubnets, vpcSecurityGroups, vpcRouteTables, vpcFunctions, agentNetworks and vpcExistingEndpoints need vpcId"},
		"vpcId":                 {"vpc-0a1b2c3d", "context vpcId=vpc-0a1b2c3d needs vpcSubnets"},
	} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{ctx: bad.value}})
		_, err := stack.Config(app)
		require.ErrorContains(t, err, bad.want, ctx)
	}
	_, err := stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"batchWindowSeconds": "1.5"}}))
	require.ErrorContains(t, err, "context batchWindowSeconds=\"1.5\": a whole number of seconds")
	_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"batchWindowSeconds": "3", "pickupTimeout": "2s"}}))
	require.ErrorContains(t, err, `workflow "order": pickup timeout 2s is shorter than 3 batching windows of 3s (9s)`)
	require.ErrorContains(t, err, "(context pickupTimeout, batchWindowSeconds)")
	_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"batchWindowSeconds": "3", "pickupTimeout": "9s"}}))
	require.NoError(t, err, "three windows are enough")
	approval := "../../shared/workflow/examples/approval.yaml"
	_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"workflows": approval, "orderDeadline": "24h"}}))
	require.ErrorContains(t, err, `workflow "approval": step await-approval waits up to 72h0m0s, longer than the order deadline of 24h0m0s`)
	require.ErrorContains(t, err, "(context orderDeadline overrides every workflow's)")
	_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"workflows": approval, "orderDeadline": "72h"}}))
	require.NoError(t, err, "a wait as long as the deadline")
	for _, bad := range []string{"shop-client-../sas-orders", "shop/client-", "", "shop.fifo"} {
		_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"allowedReplyQueuePrefixes": "ok-," + bad}}))
		require.ErrorContains(t, err, "context allowedReplyQueuePrefixes=\"ok-,"+bad+"\": \""+bad+"\" is not the start of a queue name", bad)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"stepTimeout": "10s", "supervisorRate": "5m",
		"batchWindowSeconds": "0", "orderDeadline": "2h", "backlogDepth": "50", "queueWaitAlarm": "15m"}})
	p, err := stack.Config(app)
	require.NoError(t, err)
	require.Equal(t, 2*time.Hour, p.Overrides.OrderDeadline)
	require.Equal(t, 50, p.BacklogDepth)
	require.Equal(t, 15*time.Minute, p.QueueWaitAlarm)
	require.Equal(t, 10*time.Second, p.Overrides.StepTimeout)
	require.Equal(t, 5*time.Minute, p.SupervisorRate)
	require.Zero(t, p.Topology.BatchWindow, "no batching window")
	require.Equal(t, "sas", p.Topology.Prefix, "default prefix")
	require.Equal(t, []string{"inventory", "payment", "shipping"}, p.Topology.Agents, "the order workflow by default")

	app = awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"workflows": "../../shared/workflow/examples/single.yaml"}})
	p, err = stack.Config(app)
	require.NoError(t, err)
	require.Equal(t, []string{"payment"}, p.Topology.Agents, "one agent for the one-step workflow")
	require.Equal(t, []string{"single"}, p.Workflows.Names())
}
