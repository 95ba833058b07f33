package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// An event sent ahead of an order that never comes is refused to the
// events DLQ: signal --wait says so; dlq list counts it, dlq show lists it
// with its order and reason and shows it whole; once the order is
// submitted (the cause fixed), dlq redrive moves it back and the order
// takes it.
func TestDlqListShowFixAndRedriveARefusedEvent(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	data := `{"amountCents": 1998, "by": "ana"}`
	code, out, errs := p.ctl("", "signal", "o-dl", "approved", "--ahead", "--event-id", "e-dl", "--data", data, "--wait", "40s")
	require.Equal(t, 1, code, errs)
	require.Contains(t, out, "sent event approved to order o-dl")
	require.Regexp(t, `sasctl signal: event approved of order o-dl refused: event for o-dl: no such order \(after \d receives\) `+
		`\(in the events DLQ: sasctl dlq show events \S+\)`, errs)

	code, out, _ = p.ctl("", "dlq list")
	require.Zero(t, code)
	require.Regexp(t, `events\s+`+p.prefix+`-events-dlq\s+1\s+\d+s\n`, out)
	require.Regexp(t, `orders\s+`+p.prefix+`-orders-dlq\s+0\s+-\n`, out)
	var list dlqList
	p.json("dlqList", &list, "dlq list")
	require.Len(t, list.DLQs, 9, "orders, events, scheduler, and each agent's requests and responses")
	require.Equal(t, "events", list.DLQs[1].Queue)
	require.Equal(t, 1, list.DLQs[1].Depth)
	require.False(t, list.DLQs[1].OldestSentAt.IsZero())

	var shown operator.DLQContents
	p.json("dlqShow", &shown, "dlq show", "events")
	require.Len(t, shown.Messages, 1)
	m := shown.Messages[0]
	require.Equal(t, "o-dl", m.OrderID)
	require.Equal(t, "e-dl", m.EventID)
	require.Regexp(t, `^event for o-dl: no such order \(after \d receives\)$`, m.RejectReason)
	require.Empty(t, m.Body, "a list leaves the bodies out")
	var listed operator.DLQContents
	p.json("dlqShow", &listed, "dlq list", "events")
	require.Equal(t, m.ID, listed.Messages[0].ID, "dlq list QUEUE is dlq show QUEUE")
	code, out, _ = p.ctl("", "dlq show", "events")
	require.Zero(t, code)
	require.Regexp(t, m.ID+`\s+o-dl\s+event approved \(e-dl\)\s+\d+\s+\d+s\s+event for o-dl: no such order`, out)

	var whole operator.DLQMessage
	p.json("dlqMessage", &whole, "dlq show", "events", m.ID)
	require.Contains(t, whole.Body, `"eventId":"e-dl"`)
	code, out, _ = p.ctl("", "dlq show", "events", m.ID)
	require.Zero(t, code)
	require.Contains(t, out, "Reason    event for o-dl: no such order")
	require.Contains(t, out, "Body\n{\"kind\":\"event\"")

	code, _, _ = p.ctl(approvalOrder("o-dl"), "submit", "-", "--wait", "30s") // the cause, fixed
	require.Zero(t, code)
	// It waits for its event; or SQS delivered the refused event once more
	// (at least once: CI saw it) after the order was stored, and it took it.
	require.Eventually(t, func() bool {
		_, recs, err := p.stack.Store.Load(context.Background(), "o-dl")
		return err == nil && (recs[1].State == workflow.Processed || (!recs[1].Armed.IsZero() && recs[1].State == workflow.Pending))
	}, 60*time.Second, 100*time.Millisecond, "o-dl's step 1 neither parked nor took its event")
	var moved operator.DLQRedriven
	p.json("dlqRedrive", &moved, "dlq redrive", "events", m.ID)
	require.Equal(t, 1, moved.Moved)
	require.Equal(t, m.ID, moved.Messages[0].ID)
	require.Equal(t, p.prefix+"-events", moved.To)
	p.waitState("o-dl", workflow.Processed)
	p.json("dlqShow", &shown, "dlq show", "events")
	// SQS may deliver the event twice, each delivery refused: a copy of it
	// may be left, and nothing else.
	for _, left := range shown.Messages {
		require.NotEqual(t, m.ID, left.ID, "the message redriven left the DLQ")
		require.Equal(t, "e-dl", left.EventID, "the DLQ holds nothing but the event's other copy")
		require.Equal(t, "o-dl", left.OrderID)
	}

	for want, args := range map[string][]string{
		"need a QUEUE and a MESSAGE-ID, or a QUEUE and --all": {"events"},
		"need exactly a QUEUE with --all":                     {"events", m.ID, "--all"},
	} {
		code, _, errs := p.ctl("", "dlq redrive", args...)
		require.Equal(t, 2, code, want)
		require.Contains(t, errs, want)
	}
	code, _, errs = p.ctl("", "dlq show", "events", m.ID)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no such message "+m.ID+" in "+p.prefix+"-events-dlq")
	code, _, errs = p.ctl("", "dlq show", "payments")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `no queue "payments"; the queues are orders, events, scheduler`)
}

// signal --wait reports an event an ended order refused, with the reason
// and where it lies, and one taken; submit --wait an order taken and one
// refused; dlq redrive --all says what it moved.
func TestSignalAndSubmitWaitForTheVerdict(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	code, out, errs := p.ctl(orderJSON("o-end")+"\n"+approvalOrder("o-ok"), "submit", "-", "--wait", "30s")
	require.Zero(t, code, errs)
	require.Contains(t, out, "order o-end: taken\norder o-ok: taken\n")
	p.waitEnded("o-end")

	code, out, errs = p.ctl("", "signal", "o-end", "approved", "--wait", "20s", "-o", "json")
	require.Equal(t, 1, code, errs)
	requireShape(t, "signal", out)
	var refused signalWaited
	require.NoError(t, json.Unmarshal([]byte(out), &refused))
	v := refused.Verdict
	require.Equal(t, operator.Refused, v.Verdict)
	require.Equal(t, "events", v.DLQ)
	require.NotEmpty(t, v.Reason)
	require.Contains(t, errs, "sasctl signal: event approved of order o-end refused: "+v.Reason+
		" (in the events DLQ: sasctl dlq show events "+v.MessageID+")")

	p.parked("o-ok", 1)
	code, out, errs = p.ctl("", "signal", "o-ok", "approved", "--data", `{"amountCents": 5, "by": "bo"}`, "--wait", "20s")
	require.Zero(t, code, errs)
	require.Contains(t, out, "event approved of order o-ok: taken\n")
	code, _, errs = p.ctl("", "signal", "o-ok", "approved")
	require.Zero(t, code, errs)
	require.Contains(t, errs, "an event refused is in the events DLQ with the reason: sasctl dlq show events", "without --wait: where to look")

	returns := `{"orderId":"o-wf","workflow":"returns","customerId":"c-1","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`
	code, out, errs = p.ctl(returns, "submit", "-", "--wait", "20s", "-o", "json")
	require.Equal(t, 1, code, errs)
	requireShape(t, "submit", out)
	var sent submitWaited
	require.NoError(t, json.Unmarshal([]byte(out), &sent))
	require.Len(t, sent.Verdicts, 1)
	require.Equal(t, operator.Refused, sent.Verdicts[0].Verdict)
	require.Contains(t, sent.Verdicts[0].Reason, `workflow "returns"`)
	require.Contains(t, errs, "sasctl submit: order o-wf refused: ")

	code, out, errs = p.ctl("", "dlq redrive", "orders", "--all")
	require.Zero(t, code, errs)
	// SQS may deliver the order twice: each delivery is refused, and the DLQ
	// holds a copy of each (CI saw "moved 2 messages").
	require.Regexp(t, `^moved (1 message|[2-9] messages) from `+p.prefix+`-orders-dlq to `+p.prefix+`-orders\n  \S+  order  order o-wf  \(was: order o-wf: workflow "returns"`, out)
}
