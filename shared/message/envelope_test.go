package message_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/workflow"
)

// worst is n bytes of what a string field's encoding makes longest: control
// bytes and invalid UTF-8, six bytes each (\u0001, \ufffd).
func worst(n int) string { return strings.Repeat("\x01\xff", n/2) }

// name is a name at its longest (its pattern's: nothing in it escapes).
func name(n int) string { return strings.Repeat("n", n) }

// The largest start a reply names: its step, undo and item at their largest.
var largestStart = message.Start{Step: workflow.MaxSteps - 1, Undo: true, Item: workflow.MaxForEachItems}

// largestEnvelopes are the work messages and the status with every field at
// its longest and escaped at its worst, and no order or result.
func largestEnvelopes() map[string]any {
	ready := make([]message.Start, workflow.MaxRecords-1)
	for i := range ready {
		ready[i] = largestStart
	}
	return map[string]any{
		"reply": message.AgentReply{Kind: message.KindReply, OrderID: name(64), Step: largestStart.Step, Undo: true,
			Item: largestStart.Item, StepName: name(64), Attempt: math.MaxInt, Error: worst(message.MaxErrorBytes),
			ReplyTo: worst(message.MaxReplyQueueBytes), Round: math.MaxInt, Workflow: name(40), Version: name(8), Recorded: true,
			State: string(workflow.CompensationFailed), Ready: ready, GivenBack: true},
		"request": message.AgentRequest{OrderID: name(64), Step: largestStart.Step, Undo: true, Item: largestStart.Item,
			StepName: name(64), Action: name(workflow.MaxActionBytes), Workflow: name(40), Version: name(8),
			Turn: time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", -12*3600)), Slot: worst(keyname.MaxKeyBytes),
			Round: math.MaxInt},
		"schedule": message.Schedule{Kind: message.KindSchedule, OrderID: name(64), Step: largestStart.Step, Undo: true,
			Item: largestStart.Item, Workflow: name(40), Version: name(8), Wake: true},
		"status": message.Status{Kind: message.KindStatus, OrderID: name(64), Round: math.MaxInt, Seq: math.MaxInt,
			Event: string(workflow.EventCompensationFailed), Step: name(64), State: string(workflow.CompensationFailed),
			Error: worst(message.MaxErrorBytes), At: time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC)},
	}
}

// What a work message carries beside its order and result, every field at
// its longest and escaped at its worst (an error of control bytes is six
// times as long; a reply makes up to 399 records ready), fits
// MaxEnvelopeBytes, so that with an order and a result inline at their
// largest it fits MaxWorkBytes. At 4 KiB the bound did not hold: a reply
// of a long refusal, or one that made a forEach step's items ready, was over.
func TestTheLargestEnvelopeFitsItsBound(t *testing.T) {
	t.Parallel()
	for kind, v := range largestEnvelopes() {
		b, err := message.Encode(v, 0)
		require.NoError(t, err, kind)
		t.Logf("the largest %s envelope: %d bytes (bound %d)", kind, len(b), message.MaxEnvelopeBytes)
		require.LessOrEqual(t, len(b), message.MaxEnvelopeBytes, kind)
	}
	require.LessOrEqual(t, message.MaxWorkBytes+1024, offload.MaxMessageBytes, "with its attributes, within SQS's 256 KiB")
}

// inline is a payload of n bytes as it travels, full of what encoders
// change: <, >, &, U+2028, escaped control bytes, U+FFFD and U+FFFF (kept as
// kept.Boundary.Offload keeps it).
func inline(n int) json.RawMessage {
	head, tail := `{"orderId":"o-1","x":"`, `"}`
	unit := "<a href='x'>&amp;</a>\u2028\\u0001\ufffd\\uffff"
	body := strings.Repeat(unit, (n-len(head)-len(tail))/len(unit))
	body += strings.Repeat("<", n-len(head)-len(tail)-len(body))
	return json.RawMessage(head + body + tail)
}

// Each work message at its largest (the envelope at its worst, an order and
// a result inline at MaxInline full of <, >, &) is at most MaxWorkBytes
// encoded and taken by its reader, its payloads byte for byte.
func TestEveryWorkMessageAtItsLargestIsTaken(t *testing.T) {
	t.Parallel()
	order, result := inline(kept.MaxInline), inline(kept.MaxInline)
	require.Len(t, order, kept.MaxInline)
	for kind, v := range largestEnvelopes() {
		var decode func(string) (any, error)
		switch m := v.(type) {
		case message.AgentReply:
			m.GivenBack, m.OK, m.Payload, m.Result = false, false, order, result
			v, decode = m, message.DecodeSchedulerMessage
		case message.AgentRequest:
			m.Payload = order
			v, decode = m, func(b string) (any, error) { return message.DecodeAgentRequest(b) }
		case message.Schedule:
			m.Payload = order
			v, decode = m, message.DecodeSchedulerMessage
		case message.Status:
			m.Result = result
			v, decode = m, func(b string) (any, error) { return message.DecodeStatus(b) }
		}
		b, err := message.Encode(v, message.MaxWorkBytes)
		require.NoError(t, err, kind)
		t.Logf("the largest %s: %d bytes (bound %d)", kind, len(b), message.MaxWorkBytes)
		got, err := decode(string(b))
		require.NoError(t, err, kind)
		for _, p := range carried(got) {
			require.Equal(t, string(order), string(p), "%s: its payloads byte for byte", kind)
		}
	}
}

// carried are the payloads a decoded message carries.
func carried(m any) []json.RawMessage {
	switch m := m.(type) {
	case message.AgentReply:
		return []json.RawMessage{m.Payload, m.Result}
	case message.AgentRequest:
		return []json.RawMessage{m.Payload}
	case message.Schedule:
		return []json.RawMessage{m.Payload}
	case message.Status:
		return []json.RawMessage{m.Result}
	}
	return nil
}
