package message_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

const good = `{"orderId":"o-1","customerId":"c-1","items":[{"sku":"SKU-1","quantity":2,"unitPriceCents":499}]}`

// An order is its orderId, workflow and replyQueue, and any other member
// is the task's data, kept as sent (compacted): a schema, if its workflow
// declares one, checks it at Submission.
func TestDecodeOrderAcceptsAValidOrder(t *testing.T) {
	t.Parallel()
	o, err := message.DecodeOrder(good, nil)
	require.NoError(t, err)
	require.Equal(t, "o-1", o.OrderID)
	require.JSONEq(t, good, o.JSON())
	trip := `{ "orderId": "b-7", "workflow": "travel", "replyQueue": "https://sqs.eu-west-1.amazonaws.com/000000000000/r",
	  "passengers": [{"name": "Ada", "born": "1815-12-10"}], "dates": {"out": "2027-01-02"}, "big": 123456789012345678901234567890 }`
	o, err = message.DecodeOrder(trip, nil)
	require.NoError(t, err)
	require.Equal(t, "travel", o.Workflow)
	require.Equal(t, "https://sqs.eu-west-1.amazonaws.com/000000000000/r", o.ReplyQueue)
	require.Equal(t, `{"orderId":"b-7","workflow":"travel","replyQueue":"https://sqs.eu-west-1.amazonaws.com/000000000000/r",`+
		`"passengers":[{"name":"Ada","born":"1815-12-10"}],"dates":{"out":"2027-01-02"},"big":123456789012345678901234567890}`, o.JSON(),
		"the data as sent, its numbers untouched")
	o, err = message.DecodeOrder(`{"orderId":"o-2"}`, nil)
	require.NoError(t, err, "an order may carry no data")
	require.Equal(t, `{"orderId":"o-2"}`, o.JSON())
}

func TestDecodeOrderRejectsWithAReason(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{`:                              "bad JSON",
		`[]`:                             "bad JSON: the body must be a JSON object",
		`"order"`:                        "bad JSON",
		good + `{}`:                      "data after the object",
		`{"customerId":"c"}`:             "an order needs its id, orderId",
		`{"orderId":null}`:               "an order needs its id, orderId",
		`{"orderId":7}`:                  `field "orderId" must be string`,
		`{"orderId":"o","workflow":1}`:   `field "workflow" must be string`,
		`{"orderId":"o","Workflow":"x"}`: `member "Workflow": workflow in another case`,
		strings.Replace(good, `"orderId":"o-1",`, ``, 1):                   "orderId",
		strings.Replace(good, `"o-1"`, `"has space"`, 1):                   "orderId",
		strings.Replace(good, `"o-1"`, `"o-1","workflow":"Not A Name"`, 1): `workflow "Not A Name" is not a workflow's name`,
		strings.Repeat(" ", message.MaxOrderBytes+1):                       "over the 16777216-byte limit",
		`{"orderId":"o","$sasPayload":{"bucket":"b","key":"k"}}`:           "the product's own",
		`{"orderId":"o","$sasSealed":{"key":"a2V5"}}`:                      "the product's own",
		`{"orderId":"o","$sasKey":"a2V5"}`:                                 "the product's own",
		strings.Replace(good, `}]}`, `}],"replyQueue":"not a url"}`, 1):    "replyQueue is not a queue URL",
	}
	for body, want := range cases {
		_, err := message.DecodeOrder(body, nil)
		require.Error(t, err, body)
		require.True(t, message.IsInvalid(err), body)
		require.ErrorContains(t, err, want, body[:min(len(body), 80)])
	}
}

func TestDecodeSchedulerMessage(t *testing.T) {
	t.Parallel()
	m, err := message.DecodeSchedulerMessage(`{"kind":"schedule","orderId":"o-1","step":0}`)
	require.NoError(t, err)
	require.Equal(t, message.NewSchedule("o-1", workflow.Ref{}, "", ""), m)
	m, err = message.DecodeSchedulerMessage(`{"kind":"reply","orderId":"o-1","step":1,"undo":true,"stepName":"s","attempt":2,"ok":true,"result":{"a":1},"round":2}`)
	require.NoError(t, err)
	r := m.(message.AgentReply)
	require.Equal(t, 2, r.Attempt)
	require.Equal(t, workflow.Ref{Index: 1, Undo: true}, r.Ref())
	require.Equal(t, 2, r.Round)
	m, err = message.DecodeSchedulerMessage(`{"kind":"schedule","orderId":"o-1","step":1,"undo":true}`)
	require.NoError(t, err)
	require.Equal(t, workflow.Ref{Index: 1, Undo: true}, m.(message.Schedule).Ref())

	bad := map[string]string{
		`{"kind":"nope"}`: "unknown kind",
		`{"orderId":"o"}`: "unknown kind",
		`not json`:        "bad JSON",
		`{"kind":"schedule","orderId":"o-1","step":-1}`:                     "bad orderId",
		`{"kind":"schedule","orderId":"o-1","step":0,"extra":1}`:            "unknown field",
		`{"kind":"reply","orderId":"o-1","step":0,"attempt":0,"ok":true}`:   "attempt 0",
		`{"kind":"reply","orderId":"o-1","step":0,"attempt":1,"ok":false}`:  "no error given",
		`{"kind":"reply","orderId":"o-1","step":"0","attempt":1,"ok":true}`: "must be int",
	}
	for body, want := range bad {
		_, err := message.DecodeSchedulerMessage(body)
		require.True(t, message.IsInvalid(err), body)
		require.ErrorContains(t, err, want, body)
	}
}

func TestDecodeAgentRequest(t *testing.T) {
	t.Parallel()
	ok := `{"orderId":"o-1","step":1,"undo":true,"stepName":"s"}`
	r, err := message.DecodeAgentRequest(ok)
	require.NoError(t, err)
	require.Equal(t, workflow.Ref{Index: 1, Undo: true}, r.Ref())
	bad := map[string]string{
		strings.Replace(ok, `"step":1`, `"step":-1`, 1):           "step >= 0",
		strings.Replace(ok, `"stepName":"s"`, `"stepName":""`, 1): "stepName",
		strings.Replace(ok, `"o-1","step"`, `"","step"`, 1):       "bad orderId",
		strings.Replace(ok, `}`, `,"attempt":1}`, 1):              `unknown field "attempt"`,
	}
	for body, want := range bad {
		_, err := message.DecodeAgentRequest(body)
		require.True(t, message.IsInvalid(err), body)
		require.ErrorContains(t, err, want, body)
	}
}

func TestDecodeOrdersMessage(t *testing.T) {
	t.Parallel()
	m, err := message.DecodeOrdersMessage(`{"kind":"cancel","orderId":"o-1","reason":"customer asked"}`, nil)
	require.NoError(t, err)
	require.Equal(t, message.Cancel{Kind: "cancel", OrderID: "o-1", Reason: "customer asked"}, m)
	m, err = message.DecodeOrdersMessage(`{"orderId":"o-2","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":5}]}`, nil)
	require.NoError(t, err)
	require.IsType(t, message.Order{}, m)
	for body, want := range map[string]string{
		`{"kind":"refund","orderId":"o-1"}`:                                             `unknown kind "refund"`,
		`{"kind":"cancel","orderId":""}`:                                                `cancel: bad orderId`,
		`{"kind":"cancel","orderId":"o-1","why":"x"}`:                                   `unknown field "why"`,
		`{"kind":"cancel","orderId":"o-1","reason":"` + strings.Repeat("x", 600) + `"}`: "over 512",
		`{"kind":null,"orderId":"o-1"}`:                                                 `unknown field "kind"`,
	} {
		_, err := message.DecodeOrdersMessage(body, nil)
		require.True(t, message.IsInvalid(err), body)
		require.ErrorContains(t, err, want, body)
	}
}

// One meaning per message: a member twice, a name in another case or
// invalid UTF-8 is refused by every decoder, with the member named.
func TestEveryDecoderRefusesABodyWithTwoMeanings(t *testing.T) {
	t.Parallel()
	decoders := map[string]func(string) error{
		"orders":    func(b string) error { _, err := message.DecodeOrdersMessage(b, nil); return err },
		"scheduler": func(b string) error { _, err := message.DecodeSchedulerMessage(b); return err },
		"request":   func(b string) error { _, err := message.DecodeAgentRequest(b); return err },
		"status":    func(b string) error { _, err := message.DecodeStatus(b); return err },
	}
	cases := []struct{ decoder, body, want string }{
		{"orders", `{"orderId":"a","orderId":"b","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`, `duplicate object member name "orderId"`},
		{"orders", `{"orderId":"a","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1,"quantity":9}]}`, `duplicate object member name "quantity" within "/items/0"`},
		{"orders", `{"orderId":"a","ORDERID":"b","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`, `member "ORDERID": orderId in another case`},
		{"orders", "{\"orderId\":\"a\",\"customerId\":\"c\xff\",\"items\":[{\"sku\":\"A\",\"quantity\":1,\"unitPriceCents\":1}]}", "invalid UTF-8"},
		{"orders", `{"kind":"cancel","orderId":"a","orderId":"b"}`, `duplicate object member name "orderId"`},
		{"orders", `{"kind":"event","kind":"cancel","orderId":"a"}`, `duplicate object member name "kind"`},
		{"orders", `{"kind":"event","orderId":"a","event":"e","eventId":"1","data":{"x":1,"x":2}}`, `duplicate object member name "x" within "/data"`},
		{"scheduler", `{"kind":"schedule","orderId":"a","step":0,"step":1}`, `duplicate object member name "step"`},
		{"scheduler", `{"kind":"reply","orderId":"a","step":0,"stepName":"s","attempt":1,"ok":true,"result":{"id":1,"id":2}}`, `duplicate object member name "id" within "/result"`},
		{"scheduler", `{"kind":"reply","orderId":"a","step":0,"stepName":"s","attempt":1,"ok":false,"error":"x","OK":true}`, `unknown field "OK"`},
		{"request", `{"orderId":"a","step":0,"stepName":"s","undo":false,"undo":true}`, `duplicate object member name "undo"`},
		{"status", `{"kind":"status","orderId":"a","round":1,"seq":1,"event":"processed","event":"failed","state":"Processed","at":"2026-11-25T00:00:00Z"}`, `duplicate object member name "event"`},
	}
	for _, c := range cases {
		err := decoders[c.decoder](c.body)
		require.True(t, message.IsInvalid(err), c.body)
		require.ErrorContains(t, err, c.want, c.body)
	}
	st, err := message.DecodeStatus(`{"kind":"status","orderId":"a","round":1,"seq":1,"event":"processed","state":"Processed","at":"2026-11-25T00:00:00Z"}`)
	require.NoError(t, err)
	require.Equal(t, "processed", st.Event)
}

func TestValidJSONRefusesWhatHasTwoMeanings(t *testing.T) {
	t.Parallel()
	require.True(t, message.ValidJSON([]byte(`{"id":"ch_1","amount":5,"nested":{"id":2}}`)))
	require.False(t, message.ValidJSON([]byte(`{"id":1,"id":2}`)))
	require.False(t, message.ValidJSON([]byte(`[{"a":1,"a":1}]`)))
	require.False(t, message.ValidJSON([]byte("\"\xff\"")))
	require.False(t, message.ValidJSON([]byte(`ok`)))
}

// A recorded reply carries the order and its step's result, each inline at
// its largest (a larger one travels as its claim check): the Scheduler
// takes it.
func TestAReplyWithTheLargestResultIsTaken(t *testing.T) {
	t.Parallel()
	res, err := json.Marshal(map[string]string{"blob": strings.Repeat("x", kept.MaxInline-16)})
	require.NoError(t, err)
	order, err := json.Marshal(map[string]string{"orderId": "o-1", "note": strings.Repeat("y", kept.MaxInline-40)})
	require.NoError(t, err)
	r := message.AgentReply{Kind: message.KindReply, OrderID: "o-1", Step: 0, StepName: "s", Attempt: 1, OK: true, Result: res,
		Payload: order, Recorded: true, State: "Pending", Ready: []message.Start{{Step: 1}}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	_, err = message.DecodeSchedulerMessage(string(b))
	require.NoError(t, err, "%d bytes", len(b))
}

// A reply of an attempt its flow control gave back while its order is
// undone says neither done nor refused, and what the undoing made ready:
// the Scheduler takes it (it was rejected to the DLQ as "not ok but no
// error given", found by the explorer).
func TestAGivenBackReplyIsTaken(t *testing.T) {
	t.Parallel()
	r := message.AgentReply{Kind: message.KindReply, OrderID: "o-1", Step: 1, StepName: "s", Attempt: 2, GivenBack: true,
		Recorded: true, State: "Compensating", Ready: []message.Start{{Step: 0, Undo: true}}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	got, err := message.DecodeSchedulerMessage(string(b))
	require.NoError(t, err)
	require.True(t, got.(message.AgentReply).GivenBack)
	r.GivenBack = false
	b, err = json.Marshal(r)
	require.NoError(t, err)
	_, err = message.DecodeSchedulerMessage(string(b))
	require.ErrorContains(t, err, "not ok but no error given")
}

// A reason quotes at most 80 bytes of a value it names, cut on a character:
// it was cut inside one, and the reason was not UTF-8.
func TestAReasonQuotesAValueCutOnACharacter(t *testing.T) {
	t.Parallel()
	_, err := message.DecodeOrder(`{"orderId":"x`+strings.Repeat("é", 60)+`"}`, nil)
	require.Error(t, err)
	require.True(t, utf8.ValidString(err.Error()), err.Error())
	require.Contains(t, err.Error(), `"x`+strings.Repeat("é", 38)+"…")
}
