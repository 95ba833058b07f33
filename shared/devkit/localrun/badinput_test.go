package localrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// badInput is a malformed message, the queue it is sent to, and its fate:
// rejected to a DLQ with a reason, or dropped on purpose and counted.
type badInput struct {
	name, queue, body string
	dlq, reason       string // rejected: the DLQ and a piece of the RejectReason
	dropMetric        string // or dropped on purpose: the metric that counts it
}

// badInputs are the bad inputs of a stack of topology t (queueURLOf names
// its queues; pointer sends a body by SQS Extended Client pointer).
func badInputs(t topology.Topology, queueURLOf, pointer func(string) string) []badInput {
	orders, sched := t.OrdersQueue(), t.SchedulerQueue()
	req, resp := t.AgentRequests("inventory"), t.AgentResponses("inventory")
	good := `{"orderId":"%s","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":100}]%s}`
	clients := queueURLOf(localrun.ClientQueuePrefix(t.Prefix))
	order := func(name, body, reason string) badInput {
		return badInput{name: name, queue: orders.Name, body: body, dlq: orders.DLQName, reason: reason}
	}
	toSched := func(name, body, reason string) badInput {
		return badInput{name: name, queue: sched.Name, body: body, dlq: sched.DLQName, reason: reason}
	}
	reply := func(name, body, reason string) badInput {
		return badInput{name: name, queue: resp.Name, body: body, dlq: sched.DLQName, reason: reason}
	}
	request := func(name, body, reason string) badInput {
		return badInput{name: name, queue: req.Name, body: body, dlq: req.DLQName, reason: reason}
	}
	return []badInput{
		order("truncated JSON", `{"orderId":"b1",`, "bad JSON"),
		order("an array", `[1,2]`, "bad JSON"),
		order("null", `null`, "orderId"),
		order("trailing data", fmt.Sprintf(good, "b2", "")+` {}`, "data after the object"),
		order("wrong type", `{"orderId":"b3","customerId":"c","items":[{"sku":"A","quantity":"one","unitPriceCents":1}]}`, "items[0].quantity: got string, want integer"),
		order("missing orderId", `{"customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`, "orderId"),
		order("missing customerId", `{"orderId":"b4","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`, "customerId"),
		order("unknown field", fmt.Sprintf(good, "b5", `,"discount":99`), "additional properties 'discount' not allowed"),
		order("absurd quantity", `{"orderId":"b6","customerId":"c","items":[{"sku":"A","quantity":1000000,"unitPriceCents":1}]}`, "items[0].quantity: maximum"),
		order("negative price", `{"orderId":"b7","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":-5}]}`, "items[0].unitPriceCents: minimum: got -5"),
		order("no items", `{"orderId":"b8","customerId":"c","items":[]}`, "items: minItems"),
		order("too many items", `{"orderId":"b9","customerId":"c","items":[`+strings.TrimSuffix(strings.Repeat(`{"sku":"A","quantity":1,"unitPriceCents":1},`, 101), ",")+`]}`, "items: maxItems"),
		order("bad orderId", fmt.Sprintf(good, "has space", ""), "orderId"),
		order("oversized, by SQS Extended Client pointer", pointer(tooLarge("b10")), "over the 16777216-byte limit"),
		order("disallowed reply queue", fmt.Sprintf(good, "b11", `,"replyQueue":"https://sqs.example/1/elsewhere"`), "is not allowed"),
		order("reply queue walking out of the prefix", fmt.Sprintf(good, "b12", `,"replyQueue":"`+clients+`../`+orders.Name+`"`), "path must be /ACCOUNT/QUEUE"),
		order("orderId twice", `{"orderId":"b13","orderId":"b14","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`, `duplicate object member name "orderId"`),
		order("orderId in another case", `{"orderId":"b15","ORDERID":"b16","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`, `member "ORDERID": orderId in another case`),
		order("an item's sku twice", `{"orderId":"b17","customerId":"c","items":[{"sku":"A","sku":"B","quantity":1,"unitPriceCents":1}]}`, `duplicate object member name "sku" within "/items/0"`),
		order("cancel with kind twice", `{"kind":"event","kind":"cancel","orderId":"b19"}`, `duplicate object member name "kind"`),
		order("event with its data's key twice", `{"kind":"event","orderId":"b20","event":"approved","eventId":"e1","data":{"ok":true,"ok":false}}`, `duplicate object member name "ok" within "/data"`),
		toSched("unknown kind", `{"kind":"launch","orderId":"x"}`, `unknown kind "launch"`),
		toSched("not JSON", `schedule please`, "bad JSON"),
		toSched("negative step", `{"kind":"schedule","orderId":"x","step":-1}`, "bad orderId"),
		toSched("step not in the workflow", `{"kind":"schedule","orderId":"x","step":7}`, "step 7 is not in workflow"),
		toSched("undo of a step without one", `{"kind":"schedule","orderId":"x","step":2,"undo":true}`, "the undo of step 2 is not in workflow"),
		toSched("schedule with step twice", `{"kind":"schedule","orderId":"x","step":0,"step":1}`, `duplicate object member name "step"`),
		toSched("schedule with an unknown field", `{"kind":"schedule","orderId":"x","step":0,"priority":1}`, `unknown field "priority"`),
		{name: "schedule for an order that does not exist", queue: sched.Name, body: `{"kind":"schedule","orderId":"ghost","step":0}`, dropMetric: metrics.NothingToClaim},
		reply("reply not ok without an error", `{"kind":"reply","orderId":"x","step":0,"stepName":"s","attempt":1,"ok":false}`, "no error given"),
		reply("reply with attempt 0", `{"kind":"reply","orderId":"x","step":0,"stepName":"s","attempt":0,"ok":true}`, "attempt 0"),
		reply("reply with a wrong type", `{"kind":"reply","orderId":"x","step":"zero","stepName":"s","attempt":1,"ok":true}`, "must be int"),
		reply("reply with ok twice", `{"kind":"reply","orderId":"x","step":0,"stepName":"s","attempt":1,"ok":false,"error":"no","ok":true}`, `duplicate object member name "ok"`),
		reply("reply with a result's key twice", `{"kind":"reply","orderId":"x","step":0,"stepName":"s","attempt":1,"ok":true,"result":{"id":1,"id":2}}`, `duplicate object member name "id" within "/result"`),
		reply("reply for a step not in the workflow", `{"kind":"reply","orderId":"x","step":9,"stepName":"s","attempt":1,"ok":true}`, "step 9 is not in workflow"),
		{name: "reply for an order that does not exist", queue: resp.Name, body: `{"kind":"reply","orderId":"ghost","step":0,"stepName":"reserve-inventory","attempt":1,"ok":true}`, dropMetric: metrics.StaleReplies},
		request("request carrying an attempt", `{"orderId":"x","step":0,"stepName":"s","attempt":1}`, `unknown field "attempt"`),
		request("request with step twice", `{"orderId":"x","step":0,"stepName":"s","step":2}`, `duplicate object member name "step"`),
		request("request with a field in another case", `{"orderId":"x","step":0,"stepName":"s","Undo":true}`, `unknown field "Undo"`),
		request("request without a step name", `{"orderId":"x","step":0}`, "stepName"),
		request("request with a negative step", `{"orderId":"x","step":-2,"stepName":"s"}`, "step >= 0"),
		{name: "request for an order that does not exist", queue: req.Name, body: `{"orderId":"ghost","step":0,"stepName":"reserve-inventory"}`, dropMetric: metrics.NothingToClaim},
	}
}

func TestBadInputNeverBlocksGoodInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	ctx := context.Background()
	inputs := badInputs(e.stack.Topology(), e.stack.QueueURL, e.pointer)
	require.GreaterOrEqual(t, len(inputs), 25)

	// A forged reply for another attempt of a live order: fenced off.
	ids := e.orders(10)
	e.waitEnded(ids[:1])
	inputs = append(inputs, badInput{name: "forged reply for another attempt",
		queue: e.stack.Topology().AgentResponses("inventory").Name, dropMetric: metrics.StaleReplies,
		body: fmt.Sprintf(`{"kind":"reply","orderId":"%s","step":0,"stepName":"reserve-inventory","attempt":7,"ok":false,"error":"forged"}`, ids[0])})

	// A pointer to one of the deployment's own payloads (orders/, which no
	// sender writes), where a good order by pointer may be anywhere else
	// in the bucket (the Python Extended Client's default: at its root).
	bucket := e.stack.Resources.PayloadBucket
	own := fmt.Sprintf(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":%q,"s3Key":"%s%s/order/0"}]`,
		bucket, payload.OrdersPrefix, ids[0])
	inputs = append(inputs, badInput{name: "a pointer to the deployment's own payload", queue: e.stack.Topology().OrdersQueue().Name,
		body: own, dlq: e.stack.Topology().OrdersQueue().DLQName, reason: "one of this deployment's own payloads: senders offload under incoming/"})
	e.sendByPointerAt(e.stack.Topology().OrdersQueue().Name, "3f2b9c1e-7d4a-4f6b-8e21-5a9d0c7b4e36", localrun.DemoOrder("by-pointer-at-root", 0).JSON())

	// Every bad input goes out between good orders, in the same batches.
	send := func(queue, body string) {
		url := e.stack.QueueURL(queue)
		_, err := e.stack.Deployment.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body)})
		require.NoError(t, err)
	}
	var more []string
	drops := map[string]int{}
	for i, in := range inputs {
		send(in.queue, in.body)
		id := fmt.Sprintf("after-bad-%02d", i)
		more = append(more, id)
		require.NoError(t, e.stack.SendOrders(ctx, localrun.DemoOrder(id, i).JSON()))
		if in.dropMetric != "" {
			drops[in.dropMetric]++
		}
	}
	more = append(more, "by-pointer-at-root") // taken where its sender put it
	tasks := e.waitEnded(append(ids, more...))
	for id, task := range tasks {
		require.Equal(t, workflow.Processed, task.State, "good order %s untouched", id)
	}
	e.requireEffectsOnce(append(ids, more...))
	require.Equal(t, workflow.Processed, e.step(ids[0], 0).State, "the forged failure changed nothing")

	// Each rejected input is in its DLQ, as sent, with its reason.
	wanted := map[string]map[string]string{} // dlq → body → reason
	for _, in := range inputs {
		if in.dlq != "" {
			if wanted[in.dlq] == nil {
				wanted[in.dlq] = map[string]string{}
			}
			wanted[in.dlq][in.body] = in.reason
		}
	}
	for dlq, bodies := range wanted {
		got := map[string]string{}
		e.eventually("rejections in "+dlq, e.rejectionWait(), func() bool {
			msgs, err := e.stack.Peek(ctx, e.stack.QueueURL(dlq))
			require.NoError(t, err)
			for _, m := range msgs {
				got[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes["RejectReason"].StringValue)
			}
			return len(got) >= len(bodies)
		})
		for body, reason := range bodies {
			require.Contains(t, got, body, "rejected to %s", dlq)
			require.Contains(t, got[body], reason, body[:min(len(body), 60)])
		}
		require.Len(t, got, len(bodies), "nothing else in %s", dlq)
	}
	// Each input dropped on purpose was counted (and logged).
	for name, n := range drops {
		require.GreaterOrEqual(t, e.stack.Tally.Sum(name), float64(n), name)
	}
	rejected := 0
	for _, b := range wanted {
		rejected += len(b)
	}
	require.GreaterOrEqual(t, int(e.stack.Tally.Sum(metrics.MalformedMessages)), rejected)
	logs := e.logs.Tail(4 << 20)
	require.Contains(t, logs, "message rejected to the DLQ")
	require.Contains(t, logs, "request dropped: nothing claimable")
	require.Contains(t, logs, "reply of an attempt that is not current ignored")
	require.NotContains(t, logs, "panicked", "no handler crashed")
}

// sasctl submit takes an order whose data holds U+FFFE or U+FFFF as they
// are (valid JSON and UTF-8, which SQS refuses in a body): it sends them
// escaped, as the product's own messages do, and the order is taken with
// its data the same; the others of its batch are not refused with it.
func TestAnOrderWithCharactersSQSRefusesIsSubmitted(t *testing.T) {
	t.Parallel()
	e, _ := largeEnv(t, largeFlow, nil)
	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	ctx := context.Background()
	odd := "{\"orderId\":\"odd-chars\",\"workflow\":\"large\",\"answer\":10,\"doc\":\"d\uFFFE\uFFFF<&>\"}"
	plain := `{"orderId":"plain-chars","workflow":"large","answer":10,"doc":"d"}`
	since := time.Now()
	res, err := op.Submit(ctx, []string{odd, plain})
	require.NoError(t, err)
	require.Equal(t, 2, res.Sent)
	verdicts, err := op.AwaitOrders(ctx, []string{odd, plain}, since, 60*time.Second, 200*time.Millisecond)
	require.NoError(t, err)
	for _, v := range verdicts {
		require.Equal(t, operator.Taken, v.Verdict, "%+v", v)
	}
	e.waitEndedWithin([]string{"odd-chars", "plain-chars"}, 2*time.Minute)
	stored, err := e.stack.Store.Order(ctx, "odd-chars")
	require.NoError(t, err)
	var o struct {
		Doc string `json:"doc"`
	}
	require.NoError(t, json.Unmarshal([]byte(stored), &o))
	require.Equal(t, "d\uFFFE\uFFFF<&>", o.Doc, "the same data, escaped on the way")
}
