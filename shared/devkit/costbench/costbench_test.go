package costbench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/costbench"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/workflow"
)

var motoURL, ddbURL string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMotoAndDynamoDBLocal(m, &motoURL, &ddbURL)) }

// The meter counts each request under the function that made it, and the
// units DynamoDB reports: a transactional write costs two units per item.
func TestMeterCountsRequestsAndReportedUnits(t *testing.T) {
	ctx := context.Background()
	meter := accounting.New()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: motoURL, DynamoDBEndpoint: ddbURL, Emulated: true,
		APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
	require.NoError(t, err)
	table := "meter-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	_, err = c.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &table, BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: ddbtypes.KeyTypeHash}}})
	require.NoError(t, err)
	q, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(table)})
	require.NoError(t, err)
	meter.Reset()

	fn := accounting.WithFunction(ctx, "fn")
	item := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: pk}}
	}
	_, err = c.DynamoDB.PutItem(fn, &dynamodb.PutItemInput{TableName: &table, Item: item("a")})
	require.NoError(t, err)
	_, err = c.DynamoDB.TransactWriteItems(fn, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: &table, Item: item("b")}}, {Put: &ddbtypes.Put{TableName: &table, Item: item("c")}}}})
	require.NoError(t, err)
	_, err = c.DynamoDB.GetItem(fn, &dynamodb.GetItemInput{TableName: &table, Key: item("a"), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	_, err = c.SQS.ReceiveMessage(fn, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 0})
	require.NoError(t, err)
	_, err = c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x")})
	require.NoError(t, err)

	key := func(fn, service, op string) accounting.Key {
		return accounting.Key{Function: fn, Service: service, Operation: op}
	}
	got := meter.Snapshot()
	require.Equal(t, accounting.Usage{Requests: 1, WriteUnits: 1, ReportedWriteUnits: 1}, got[key("fn", "DynamoDB", "PutItem")])
	require.Equal(t, accounting.Usage{Requests: 1, WriteUnits: 4, ReportedWriteUnits: 2}, got[key("fn", "DynamoDB", "TransactWriteItems")],
		"DynamoDB Local reports 2 for the table's two items; DynamoDB bills 2 each")
	require.Equal(t, accounting.Usage{Requests: 1, ReadUnits: 1}, got[key("fn", "DynamoDB", "GetItem")])
	require.Equal(t, int64(1), got[key("fn", "SQS", accounting.EmptyReceive)].Requests)
	require.Equal(t, int64(1), got[key("", "SQS", "SendMessage")].Requests, "untagged requests are counted apart")
	require.Len(t, got, 5)
}

// A write its condition refuses reports no capacity, but DynamoDB bills it:
// a unit per started KB of the larger of the existing item (when the request
// asked for it back) and the new one, at least one. The meter bills it so,
// and counts it apart.
func TestMeterBillsAWriteItsConditionRefused(t *testing.T) {
	ctx := context.Background()
	meter := accounting.NewForDynamoDBLocal()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: motoURL, DynamoDBEndpoint: ddbURL, Emulated: true,
		APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
	require.NoError(t, err)
	table := "refused-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	_, err = c.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &table, BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: ddbtypes.KeyTypeHash}}})
	require.NoError(t, err)
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	small := map[string]ddbtypes.AttributeValue{"PK": s("small")}
	large := map[string]ddbtypes.AttributeValue{"PK": s("large"), "Body": s(strings.Repeat("x", 1500))}
	for _, it := range []map[string]ddbtypes.AttributeValue{small, large} {
		_, err = c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it})
		require.NoError(t, err)
	}
	meter.Reset()
	notThere := aws.String("attribute_not_exists(PK)")
	_, err = c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: small, ConditionExpression: notThere})
	require.Error(t, err)
	_, err = c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: large, ConditionExpression: notThere})
	require.Error(t, err)
	update := func(key string, old ddbtypes.ReturnValuesOnConditionCheckFailure) {
		_, err := c.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table,
			Key: map[string]ddbtypes.AttributeValue{"PK": s(key)}, UpdateExpression: aws.String("SET N = :n"),
			ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
			ExpressionAttributeValues:           map[string]ddbtypes.AttributeValue{":n": s("1")},
			ReturnValuesOnConditionCheckFailure: old})
		require.Error(t, err)
	}
	update("large", ddbtypes.ReturnValuesOnConditionCheckFailureAllOld)
	update("large", "")
	got := meter.Snapshot()
	put := got[accounting.Key{Service: "DynamoDB", Operation: "PutItem"}]
	require.Equal(t, accounting.Usage{Requests: 2, WriteUnits: 1 + 2, Refused: 2, RefusedUnits: 1 + 2}, put,
		"a put refused: the larger of the items, 1 KB then 2 KB")
	upd := got[accounting.Key{Service: "DynamoDB", Operation: "UpdateItem"}]
	require.Equal(t, accounting.Usage{Requests: 2, WriteUnits: 2 + 1, Refused: 2, RefusedUnits: 2 + 1}, upd,
		"an update refused: the existing item's 2 KB when it asked for it back, else the least, one")
}

// An index write inside a transaction: DynamoDB Local reports it at twice
// the units it reports outside one; the meter for DynamoDB Local bills it at
// the standard rate, as DynamoDB does, and keeps the report beside it.
func TestMeterBillsATransactionsIndexWriteAtTheStandardRate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		meter  *accounting.Meter
		billed float64
	}{
		{"as reported", accounting.New(), 2 + 2 + 2},
		{"DynamoDB Local", accounting.NewForDynamoDBLocal(), 2 + 2 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: motoURL, DynamoDBEndpoint: ddbURL, Emulated: true,
				APIOptions: []func(*middleware.Stack) error{tc.meter.AddTo}})
			require.NoError(t, err)
			table := "meteridx-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
			str := func(n string) ddbtypes.AttributeDefinition {
				return ddbtypes.AttributeDefinition{AttributeName: aws.String(n), AttributeType: ddbtypes.ScalarAttributeTypeS}
			}
			hash := func(n string) []ddbtypes.KeySchemaElement {
				return []ddbtypes.KeySchemaElement{{AttributeName: aws.String(n), KeyType: ddbtypes.KeyTypeHash}}
			}
			_, err = c.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &table, BillingMode: ddbtypes.BillingModePayPerRequest,
				AttributeDefinitions: []ddbtypes.AttributeDefinition{str("PK"), str("Due")}, KeySchema: hash("PK"),
				GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{IndexName: aws.String("ByDue"), KeySchema: hash("Due"),
					Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly}}}})
			require.NoError(t, err)
			tc.meter.Reset()
			item := func(pk string, indexed bool) map[string]ddbtypes.AttributeValue {
				it := map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: pk}}
				if indexed {
					it["Due"] = &ddbtypes.AttributeValueMemberS{Value: "soon"}
				}
				return it
			}
			_, err = c.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: &table, Item: item("a", true)}}, {Put: &ddbtypes.Put{TableName: &table, Item: item("b", false)}}}})
			require.NoError(t, err)
			_, err = c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item("c", true)})
			require.NoError(t, err)
			got := tc.meter.Snapshot()
			tx := got[accounting.Key{Service: "DynamoDB", Operation: "TransactWriteItems"}]
			require.Equal(t, tc.billed, tx.WriteUnits, "two items at two units, and the index entry")
			require.Equal(t, 6.0, tx.ReportedWriteUnits, "DynamoDB Local reports the index entry at 2 in a transaction")
			put := got[accounting.Key{Service: "DynamoDB", Operation: "PutItem"}]
			require.Equal(t, accounting.Usage{Requests: 1, WriteUnits: 1 + 1, ReportedWriteUnits: 1 + 1}, put,
				"the item, and the index entry at 1 outside a transaction")
		})
	}
}

// A small bench run, as CI runs it: every order processed, the requests per
// order what the design says, and the figures printed.
func TestBenchSmallRun(t *testing.T) {
	p := costbench.DefaultPlan(10)
	p.BatchSizes = []int{10}
	p.Endpoint, p.DynamoDBEndpoint = motoURL, ddbURL
	p.Timeout = 2 * time.Minute
	res, err := costbench.Execute(context.Background(), p, nil)
	require.NoError(t, err)
	require.Len(t, res.Runs, 2)
	for _, r := range res.Runs {
		steps := map[string]int{workflow.SingleWorkflow: 1, workflow.OrderWorkflow: 3}[r.Workflow]
		require.Equal(t, steps, r.Steps)
		require.InDelta(t, 0.1, r.Requests["producer SQS SendMessageBatch"], 1e-9, "ten orders per send")
		// At least once each; SQS (and moto more often) may deliver a message
		// twice, and the duplicate's write is a request too.
		between := func(v, lo float64, what string) {
			// Per order figures are sums of quotients: 1 may come out as
			// 0.9999999999999982.
			require.GreaterOrEqual(t, v, lo-1e-9, what)
			require.Less(t, v, 1.5*lo, what)
		}
		between(r.Requests["submission DynamoDB TransactWriteItems"], 1, "one submission each")
		require.Zero(t, r.Requests["scheduler DynamoDB UpdateItem"], "the Agents record the outcomes: the Scheduler writes nothing")
		writes := 0.0
		for k, v := range r.Requests {
			if strings.HasPrefix(k, "agent-") && strings.HasSuffix(k, " DynamoDB UpdateItem") {
				writes += v
			}
		}
		between(writes, float64(2*steps+1), "one claim and one outcome per step, by its agent, and the end's count in its workflow's health")
		require.Zero(t, r.Requests["scheduler DynamoDB TransactWriteItems"], "a step's and its task's change are one item's")
		require.GreaterOrEqual(t, r.PerOrder.WriteUnits, 4+2*float64(steps), "submission: two items at two units each")
		between(r.PerOrder.ReportedWriteUnits-(r.PerOrder.WriteUnits-r.PerOrder.RefusedWriteUnits), 1,
			"the submission's index entry: reported at 2, billed at 1")
		if steps == 1 {
			require.Zero(t, r.Requests["scheduler SQS SendMessageBatch"],
				"the first step goes from Submission to its Agent: a one-step order's Scheduler only reads its reply")
		}
		require.Positive(t, r.LatencyP50)
		requireLogsCounted(t, r)
		// Lambda time is priced from the counts, not from the time measured
		// against the emulators: an Agent's invocation of ten quick calls
		// bills tens of milliseconds, under its 250 ms reply flush, whatever
		// the machine's load made of it here.
		gbs := 0.0
		for fn, f := range r.Functions {
			require.Positive(t, f.BilledMsPerInvocation, fn)
			require.Positive(t, f.MsPerInvocation, fn)
			if strings.HasPrefix(fn, "agent-") {
				require.Less(t, f.BilledMsPerInvocation, 250.0, fn)
			}
			gbs += f.GBSecondsPerOrder
		}
		require.InDelta(t, gbs, r.PerOrder.LambdaGBSeconds, 1e-12)
		require.Greater(t, r.Cost.Total, 0.0)
		require.Less(t, r.CoordinatorsAt128MB, r.Cost.Total)
		require.Equal(t, steps+2, r.SFN.Transitions)
		require.Greater(t, r.SFN.Standard.Total, r.Cost.Total)
	}
	for wf, steps := range map[string]int{workflow.SingleWorkflow: 1, workflow.OrderWorkflow: 3} {
		stages := res.Stages[wf]
		require.Len(t, stages, 1+2*steps, "the submission, then a claim and a completion per step")
		units := 0.0
		for _, st := range stages {
			require.Less(t, st.ItemBytes, 1024, "%s %s: the item stays under a KB, so each write is one unit", wf, st.Write)
			units += st.WriteUnits
		}
		require.Equal(t, 5.0, stages[0].WriteUnits, "order and state item, two units each in a transaction, and the index entry")
		require.Equal(t, 3.0, stages[len(stages)-1].WriteUnits, "the last completion, the order leaving the index, and its count in its workflow's health")
		require.Equal(t, float64(7+2*steps), units, "5 to submit, 1 per claim and per completion, 1 to leave the index, 1 to count the end")
	}
	var text, svg, js bytes.Buffer
	res.Print(&text)
	t.Log("\n" + text.String())
	require.NoError(t, res.SVG(&svg))
	dec := xml.NewDecoder(&svg)
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the chart is well-formed SVG")
	}
	require.NoError(t, json.NewEncoder(&js).Encode(res))
	var back costbench.Result
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, res.Runs[0].Cost, back.Runs[0].Cost)
}

// requireLogsCounted checks a run counted what the handlers wrote: the
// normal path's metrics as one EMF document per invocation, no routine log
// line per order, and Lambda's own lines for every invocation, priced.
func requireLogsCounted(t *testing.T, r costbench.Run) {
	t.Helper()
	l := r.Logs
	require.Positive(t, l.MetricLines)
	// An invocation that ends orders adds its workflow's health documents:
	// one per end state and one per step (health.Emit), not one per order.
	require.LessOrEqual(t, l.MetricLines, r.PerOrder.LambdaInvocations*float64(2+r.Steps)+1e-9,
		"at most one EMF document per invocation, and those of its workflow's health")
	// No routine line per order at the default level (there were two, an
	// order's acceptance and its end); an incident a loaded machine causes
	// (a re-sent request, a duplicate delivery's refused claim) still
	// writes its line, so a run may have a few.
	require.Less(t, l.Lines, 0.5, "no routine log line per order at the default level")
	require.Greater(t, l.PlatformBytes, 100*r.PerOrder.LambdaInvocations, "START, END and REPORT for every invocation")
	require.InDelta(t, l.Total(), r.PerOrder.LogBytes, 1e-9)
	require.InDelta(t, r.PerOrder.LogBytes*0.5e-9*1e6, r.Cost.Logs, 1e-9, "$0.50 per GB")
	require.InDelta(t, r.Cost.SQS+r.Cost.Lambda+r.Cost.DynamoDB+r.Cost.SNS+r.Cost.Logs, r.Cost.Total, 1e-9)
}

// A payload run counts the payload bucket's requests and bytes: an order of
// 100 KB (kept, not offloaded: under SQS's 256 KB) and three answers as
// large are four PUTs, and the steps read back what they are given: the
// order, then the order and one result, then the order and two, six GETs;
// their storage is priced.
func TestAPayloadRunCountsTheBucketsRequestsAndBytes(t *testing.T) {
	p := costbench.DefaultPlan(4)
	p.Workflows, p.BatchSizes, p.PayloadBytes = nil, []int{10}, []int{100 << 10}
	p.Endpoint, p.DynamoDBEndpoint = motoURL, ddbURL
	p.Timeout = 2 * time.Minute
	res, err := costbench.Execute(context.Background(), p, nil)
	require.NoError(t, err)
	require.Len(t, res.Runs, 1)
	r := res.Runs[0]
	require.Equal(t, 100<<10, r.PayloadBytes)
	require.GreaterOrEqual(t, r.PerOrder.S3Puts, 4.0, "the order and three results")
	require.Less(t, r.PerOrder.S3Puts, 6.0, "a redelivery writes again, rarely")
	require.GreaterOrEqual(t, r.PerOrder.S3Gets, 6.0, "what each step reads back")
	require.InDelta(t, 4*(100<<10), r.PerOrder.S3KeptBytes, 4<<10, "four payloads kept, a result about its size")
	require.Greater(t, r.PerOrder.S3Bytes, 9*float64(100<<10), "ten moved: four up, six down")
	require.Greater(t, r.Cost.S3, 0.0)
	require.InDelta(t, r.Cost.SQS+r.Cost.Lambda+r.Cost.DynamoDB+r.Cost.SNS+r.Cost.Logs+r.Cost.S3, r.Cost.Total, 1e-9)
}
