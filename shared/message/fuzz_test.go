package message_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/message"
)

// Run one: go test ./shared/message -fuzz FuzzDecodeOrder -fuzztime 30s
// (plain go test runs the seeds below).

func FuzzDecodeOrder(f *testing.F) {
	for _, s := range []string{good, `{`, `[]`, `null`, `{"orderId":"o","customerId":"c","items":[]}`,
		`{"orderId":"o","customerId":"c","items":[{"sku":"A","quantity":"1","unitPriceCents":1}]}`,
		`{"orderId":"o","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}],"replyQueue":"https://q/1/a"}`,
		`{"orderId":"a","orderId":"b","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`,
		`{"orderId":"a","OrderID":"b","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		o, err := message.DecodeOrder(body, nil)
		if err != nil {
			require.True(t, message.IsInvalid(err), "every refusal is an InvalidError: %v", err)
			return
		}
		require.NoError(t, o.Validate())
		require.True(t, message.ValidJSON([]byte(body)), "an accepted body has one meaning")
		var lenient struct{ OrderID, Workflow, ReplyQueue string } // encoding/json: last member wins, any case
		require.NoError(t, json.Unmarshal([]byte(body), &lenient))
		require.Equal(t, []string{o.OrderID, o.Workflow, o.ReplyQueue}, []string{lenient.OrderID, lenient.Workflow, lenient.ReplyQueue},
			"every reader takes an accepted order the same way")
		var sent, kept any
		require.NoError(t, json.Unmarshal([]byte(body), &sent))
		require.NoError(t, json.Unmarshal([]byte(o.JSON()), &kept))
		require.Equal(t, sent, kept, "the order's data kept as sent")
		again, err := message.DecodeOrder(o.JSON(), nil)
		require.NoError(t, err, "an accepted order re-encodes to an accepted order")
		require.Equal(t, o, again)
	})
}

func FuzzDecodeSchedulerMessage(f *testing.F) {
	for _, s := range []string{`{"kind":"schedule","orderId":"o","step":0}`, `{"kind":"schedule","orderId":"o","step":1,"undo":true}`,
		`{"kind":"reply","orderId":"o","step":0,"stepName":"s","attempt":1,"ok":true,"result":{"a":1}}`,
		`{"kind":"reply","orderId":"o","step":0,"stepName":"s","attempt":2,"ok":false,"error":"no"}`, `{"kind":1}`, `{}`, `x`,
		`{"kind":"reply","orderId":"o","step":0,"stepName":"s","attempt":2,"ok":false,"error":"no","ok":true}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := message.DecodeSchedulerMessage(body)
		if err != nil {
			require.True(t, message.IsInvalid(err), "every refusal is an InvalidError: %v", err)
			return
		}
		require.True(t, message.ValidJSON([]byte(body)), "an accepted body has one meaning")
		b, err := json.Marshal(m)
		require.NoError(t, err)
		again, err := message.DecodeSchedulerMessage(string(b))
		require.NoError(t, err, "an accepted message re-encodes to an accepted one: %s", b)
		require.IsType(t, m, again)
	})
}

func FuzzDecodeAgentRequest(f *testing.F) {
	for _, s := range []string{`{"orderId":"o","step":0,"stepName":"s"}`,
		`{"orderId":"o","step":2,"undo":true,"stepName":"s"}`, `{"orderId":"o","step":0,"stepName":"s","attempt":1}`, `{}`, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r, err := message.DecodeAgentRequest(body)
		if err != nil {
			require.True(t, message.IsInvalid(err), "every refusal is an InvalidError: %v", err)
			return
		}
		b, err := json.Marshal(r)
		require.NoError(t, err)
		_, err = message.DecodeAgentRequest(string(b))
		require.NoError(t, err, "an accepted request re-encodes to an accepted one: %s", b)
	})
}

func FuzzDecodeOrdersMessage(f *testing.F) {
	for _, s := range []string{`{"kind":"cancel","orderId":"o"}`, `{"kind":"cancel","kind":"event","orderId":"o"}`,
		`{"kind":"event","orderId":"o","event":"approved","eventId":"e","data":{"a":1}}`,
		`{"kind":"event","orderId":"o","event":"approved","eventId":"e","data":{"a":1,"a":2}}`, `{"KIND":"cancel","orderId":"o"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := message.DecodeOrdersMessage(body, nil)
		if err != nil {
			require.True(t, message.IsInvalid(err), "every refusal is an InvalidError: %v", err)
			return
		}
		require.True(t, message.ValidJSON([]byte(body)), "an accepted body has one meaning")
		b, err := json.Marshal(m)
		require.NoError(t, err)
		again, err := message.DecodeOrdersMessage(string(b), nil)
		require.NoError(t, err, "an accepted message re-encodes to an accepted one: %s", b)
		b2, err := json.Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(b), string(b2), "and decodes to what it was")
	})
}
