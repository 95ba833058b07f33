package explore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/workflow"
)

// The explorer's queues refuse what SQS refuses, and note it, a handler's
// send apart from the explorer's own: a body over 256 KiB with its
// attributes, a raw control character in a body or an attribute; U+FFFD,
// <, > and & they take.
func TestTheQueuesRefuseWhatSQSRefuses(t *testing.T) {
	q := &queues{now: func() (t0 time.Time) { return t0 }}
	send := func(body string, attrs map[string]types.MessageAttributeValue) error {
		_, err := q.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String("http://q/1/x"),
			MessageBody: aws.String(body), MessageAttributes: attrs})
		return err
	}
	require.NoError(t, send("<&>\ufffd\u2028 \t\n", nil))
	require.NoError(t, send(strings.Repeat("x", maxMessageBytes), nil))
	require.Error(t, send(strings.Repeat("x", maxMessageBytes-10), map[string]types.MessageAttributeValue{
		"RejectReason": {DataType: aws.String("String"), StringValue: aws.String("why")}}))
	require.Error(t, send("a\x01b", nil))
	require.Error(t, send("a\xffb", nil))
	require.Error(t, send("ok", map[string]types.MessageAttributeValue{
		"RejectReason": {DataType: aws.String("String"), StringValue: aws.String("bad JSON: \x01")}}))
	require.Len(t, q.outside, 3, "the first three noted")
	require.Empty(t, q.refused, "none a handler's")
	require.Len(t, q.msgs, 2)
	handler := context.WithValue(context.Background(), actorKey{}, &actor{})
	_, err := q.SendMessage(handler, &sqs.SendMessageInput{QueueUrl: aws.String("http://q/1/x"), MessageBody: aws.String("a")})
	require.Error(t, err)
	require.Len(t, q.refused, 1, "a handler's send refused, noted apart")
}

// loans is a workflow whose orders' id is their applicationId.
var loans = workflow.MustSet(workflow.Definition{Name: "loan", IDField: shapes.ApplicationID})

// A run whose workflow names its orders' id field sends its orders so:
// plain, padded (a payload run's) or hostile, each is an order of the
// workflow, its id its own.
func TestAnExplorersOrdersAreNamedByTheirWorkflowsIDField(t *testing.T) {
	named := 0
	for seed := uint64(1); seed < 40; seed++ {
		p := newPlan(seed, false, false, false, true)
		set := workflow.MustSet(p.def)
		for _, o := range p.orders {
			require.Equal(t, p.def.IDField, o.idField)
			m, err := message.DecodeOrder(o.body(), set)
			require.NoError(t, err, "seed %d", seed)
			require.Equal(t, o.id, m.OrderID)
			if m.IDField == shapes.ApplicationID {
				named++
			}
		}
	}
	require.Positive(t, named, "some runs' orders named by their applicationId")
}

// A hostile run's orders, answers and events are their size exactly, on
// the bytes that travel: either side of the inline limit in a payload run;
// an order or an event is one SQS takes and Submission accepts; an answer
// that is not JSON is sized as kept (quoted), and a callback's is JSON.
func TestHostilePayloadsAreAtTheirSizes(t *testing.T) {
	w := &World{plan: plan{seed: 5, hostile: true, payloads: true}, drove: map[string]int{}}
	kinds := map[bool]int{}
	for i := range 60 {
		key := "x5-0/s" + string(rune('a'+i%26)) + strings.Repeat("#1", i/26)
		b := w.done(key, false)
		size := len(b)
		if !json.Valid(b) {
			size = hostile.MarshalLen(b)
		}
		kinds[json.Valid(b)]++
		require.Contains(t, hostileSizes, size)
		require.True(t, json.Valid(w.done(key, true)), "a callback's data is JSON")
		d := w.eventData("x5-0", key)
		require.Contains(t, inlineSizes, len(d))
		for _, ids := range []workflow.Set{{}, loans} { // an order named by its orderId, and by its applicationId
			body := hostileBody(shop.Order{OrderID: "x5-" + key[5:6]}, ids.IDField(""), 0, hostileSizes[i%len(hostileSizes)])
			require.Len(t, body, hostileSizes[i%len(hostileSizes)])
			require.True(t, sqsTakes(body))
			o, err := message.DecodeOrder(body, ids)
			require.NoError(t, err)
			require.Equal(t, "x5-"+key[5:6], o.OrderID)
		}
	}
	require.Positive(t, kinds[true])
	require.Positive(t, kinds[false])
}
