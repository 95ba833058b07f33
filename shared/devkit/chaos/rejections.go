package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/shared/devkit/localrun"
)

// rejection is a message the run sends that the pipeline must refuse: it
// must end in the orders DLQ with a reason saying why, never dropped in
// silence, and the good orders around it untouched.
type rejection struct {
	name, body, reason string
}

// badInputs are the malformed or ambiguous messages the run sends among its
// orders: a member twice, a name in another case, a reply queue that walks
// out of the allowed prefix, events for no order or for an event no
// workflow waits for.
func badInputs(p Plan, stack *localrun.Stack, waitsOrder string) []rejection {
	tag := fmt.Sprintf("bad-%d", p.Seed)
	item := `"items":[{"sku":"A","quantity":1,"unitPriceCents":1}]`
	walked := stack.QueueURL(localrun.ClientQueuePrefix(stack.Topology().Prefix) + "../" + stack.Topology().OrdersQueue().Name)
	out := []rejection{
		{"orderId twice", fmt.Sprintf(`{"orderId":"%s-1","orderId":"%s-2","customerId":"c",%s}`, tag, tag, item), `duplicate object member name "orderId"`},
		{"orderId in another case", fmt.Sprintf(`{"orderId":"%s-3","ORDERID":"%s-4","customerId":"c",%s}`, tag, tag, item), `member "ORDERID": orderId in another case`},
		{"an item's sku twice", fmt.Sprintf(`{"orderId":"%s-5","customerId":"c","items":[{"sku":"A","sku":"B","quantity":1,"unitPriceCents":1}]}`, tag), `duplicate object member name "sku" within "/items/0"`},
		{"reply queue walking out", fmt.Sprintf(`{"orderId":"%s-6","customerId":"c",%s,"replyQueue":"%s"}`, tag, item, walked), "the path must be /ACCOUNT/QUEUE"},
		{"cancel with kind twice", fmt.Sprintf(`{"kind":"event","kind":"cancel","orderId":"%s-7"}`, tag), `duplicate object member name "kind"`},
		{"event data with a key twice", fmt.Sprintf(`{"kind":"event","orderId":"%s-8","event":"approved","eventId":"x","data":{"a":1,"a":2}}`, tag), `duplicate object member name "a" within "/data"`},
		{"event for no order", fmt.Sprintf(`{"kind":"event","orderId":"%s-ghost","event":"approved","eventId":"g"}`, tag), "no such order"},
	}
	if waitsOrder != "" {
		out = append(out, rejection{"event the workflow never waits for",
			fmt.Sprintf(`{"kind":"event","orderId":"%s","event":"shipped","eventId":"s-1"}`, waitsOrder), `waits for no event "shipped"`})
	}
	return out
}

// endedEvents are approvals sent to waits orders after they ended: each is
// refused, as the order waits for nothing any more.
func endedEvents(p Plan, ids []string, done map[string]bool) []rejection {
	var out []rejection
	for i, id := range ids {
		if len(out) == 5 {
			break
		}
		if p.waits(id) && done[id] {
			out = append(out, rejection{"event for an ended order", approval(id, i, "late-"+id), "it waits for nothing"})
		}
	}
	return out
}

// awaitRejections waits (up to within) until every rejection is in the
// orders DLQ, and returns those that are not, or are there with another
// reason. It reads the DLQ a batch at a time and stops as soon as all are
// found: a long run's DLQ holds thousands of refused events, and reading
// them all (a peek) on a single-threaded emulator takes minutes.
func awaitRejections(ctx context.Context, stack *localrun.Stack, rs []rejection, within time.Duration) ([]string, error) {
	got := map[string]string{} // body → reason
	dlq := stack.QueueURL(stack.Topology().OrdersQueue().DLQName)
	deadline := time.Now().Add(within)
	for {
		out, err := stack.Deployment.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlq,
			MaxNumberOfMessages: 10, VisibilityTimeout: int32(within.Seconds()) + 60, MessageAttributeNames: []string{"All"}})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", dlq, err)
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes["RejectReason"].StringValue)
		}
		missing := unmatched(rs, got)
		switch {
		case len(missing) == 0 || time.Now().After(deadline):
			return missing, nil
		case len(out.Messages) == 0 && !sleepCtx(ctx, time.Second): // all read: wait for the rest to arrive
			return missing, ctx.Err()
		}
	}
}

func unmatched(rs []rejection, got map[string]string) []string {
	var out []string
	for _, r := range rs {
		reason, ok := got[r.body]
		switch {
		case !ok:
			out = append(out, r.name+": not in the orders DLQ")
		case !strings.Contains(reason, r.reason):
			out = append(out, fmt.Sprintf("%s: rejected as %q, want %q", r.name, reason, r.reason))
		}
	}
	return out
}
