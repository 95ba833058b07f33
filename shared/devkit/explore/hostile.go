package explore

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/workflow"
)

// A hostile run (plan.hostile) sends orders, answers, callbacks and events
// made of what encoders change (shared/devkit/hostile: raw <, > and &,
// control characters as \u escapes, U+FFFD, U+2028), half of its services'
// answers not JSON (raw control bytes and invalid UTF-8 in XML); in a
// payload run, each at a size either side of the inline limit it runs
// with, measured on the bytes that travel (a body as sent, an answer as
// kept: its JSON, or its text as encoding/json quotes it).

// hostileSizes are a payload run's hostile sizes: either side of its
// inline limit, and (an answer's) its shapes' result limit.
var hostileSizes = []int{payload.MinInline, payload.MinInline + 1, workflow.DefaultResultLimit}

// inlineSizes are a payload run's hostile sizes of what is not an answer
// (an order, an event): either side of its inline limit.
var inlineSizes = hostileSizes[:2]

// plainSize is a hostile run's size without a bucket (every payload
// inline): under its shapes' result limit.
const plainSize = 300

// hostileRun decides whether the run seed names is hostile: half of them,
// from a stream of its own (the seed's other choices are as they were).
func hostileRun(seed uint64) bool { return rand.New(rand.NewPCG(seed, 0x4057)).IntN(2) == 0 }

// sizeOf is the hostile size of what name names (an order, an answer's
// key, an event), by its hash among sizes.
func (p plan) sizeOf(name string, sizes []int) int {
	if !p.payloads {
		return plainSize
	}
	return sizes[int(remotesim.Mix(p.seed, "size", name)*float64(len(sizes)))]
}

// hostileBody is o as its client sends it in a hostile run: its id named
// idField (its workflow's id field: shapes.WithIDField), and a note of
// hostile text that makes the body its size as sent.
func hostileBody(so shop.Order, idField string, seed uint64, size int) string {
	head, err := hostile.Marshal(so)
	if err != nil {
		panic(err) // an order always marshals
	}
	head = shapes.WithIDField(head, idField)
	const member = `,"note":`
	n := max(size-len(head)-len(member), 2)
	return head[:len(head)-1] + member + hostile.Quote(hostile.TextQuoted(seed^hashOf(so.OrderID), n)) + "}"
}

// hashOf is a seed of s.
func hashOf(s string) uint64 { return uint64(remotesim.Mix(0, s) * (1 << 53)) }

// done is what a service answers (async: calls back with) for a call of
// key it applied: in a hostile run, JSON of hostile text or (half of the
// calls that are not async) XML of raw control bytes and invalid UTF-8,
// exactly its size as kept.
func (w *World) done(key string, async bool) []byte {
	if !w.hostile {
		return doneBody(key, w.pad())
	}
	size, seed := w.plan.sizeOf("answer/"+key, hostileSizes), w.seed^hashOf(key)
	if !async && remotesim.Mix(w.seed, "not-json", key) < 0.5 {
		prefix := fmt.Sprintf("<?xml version=\"1.0\"?><answer key=%q>", key)
		const suffix = "</answer>"
		n := max(size-(hostile.MarshalLen([]byte(prefix+suffix))-2), 2)
		w.count("answers not JSON")
		return append(append([]byte(prefix), hostile.BodyMarshalled(seed, n)...), suffix...)
	}
	head := fmt.Sprintf(`{"key":%q,"text":`, key)
	n := max(size-len(head)-1, 2)
	return []byte(head + hostile.Quote(hostile.TextQuoted(seed, n)) + "}")
}

// eventData is what an event its client sends carries: in a hostile run,
// a note of hostile text beside it, making it its size.
func (w *World) eventData(orderID, eventID string) json.RawMessage {
	if !w.hostile {
		return json.RawMessage(`{"approved":true}`)
	}
	const head = `{"approved":true,"note":`
	n := max(w.plan.sizeOf("event/"+orderID+"/"+eventID, inlineSizes)-len(head)-1, 2)
	return json.RawMessage(head + hostile.Quote(hostile.TextQuoted(w.seed^hashOf(orderID+eventID), n)) + "}")
}
