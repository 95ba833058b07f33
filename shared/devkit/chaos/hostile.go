package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/workflow"
)

// A hostile payload (Plan.Hostile) is made of what encoders change
// (shared/devkit/hostile), at a size either side of a limit the product
// decides on, measured on the bytes that travel: an order's and an event's
// body as sent, an answer as kept (its JSON, or its text as encoding/json
// quotes it).

// sizeClass is a size a hostile payload is made at: its body as sent (0:
// as kept says), and kept, a large order's services' answers as kept, or
// an approval's data.
type sizeClass struct {
	name       string
	body, kept int
}

// documentClasses are the sizes of the hostile large orders, in turn: the
// k-th is made at the k-th (mod their number). The first two put an order
// and a result in one message: kept inline, both (on their raw size),
// then escaped in the message that carries them.
var documentClasses = []sizeClass{
	{"at the inline limit", payload.DefaultInline, payload.DefaultInline},
	{"one byte over SQS's limit (by pointer)", offload.MaxMessageBytes + 1, payload.DefaultInline},
	{"one byte over the inline limit", payload.DefaultInline + 1, payload.DefaultInline + 1},
	{"at SQS's limit", offload.MaxMessageBytes, offload.MaxMessageBytes},
	{"free (4 KB to 600 KB)", 0, 0},
}

// approvalClasses are the sizes of the hostile approvals (by the order's
// hash): their data (kept inline or in the bucket) either side of the
// inline limit, their body either side of SQS's.
var approvalClasses = []sizeClass{
	{"small", 0, 1 << 10},
	{"data at the inline limit", 0, payload.DefaultInline},
	{"data one byte over the inline limit", 0, payload.DefaultInline + 1},
	{"at SQS's limit", offload.MaxMessageBytes, 0},
	{"one byte over SQS's limit (by pointer)", offload.MaxMessageBytes + 1, 0},
}

// keyBytes are the lengths of the hostile keys of calls in flight (a flow
// order's customer): a request in a key's line escaped past 300 bytes,
// the longest kept as it is (keyname.MaxKeyBytes), and longer, kept by its
// hash.
var keyBytes = []int{141, keyname.MaxKeyBytes, keyname.MaxKeyBytes + 1, 2 * keyname.MaxKeyBytes}

// answerSizes are the sizes of the hostile answers of the services of the
// workflows with the default result limit: small, and at the limit.
var answerSizes = []int{256, 2 << 10, workflow.DefaultResultLimit}

// hostileOrders are the plan's hostile large orders, each with its size
// class (documentClasses), in turn; the orders at the limits are not
// among them (limitBody makes them hostile).
func (p Plan) hostileOrders() map[string]int {
	out := map[string]int{}
	for i := range p.Orders {
		id := p.orderID(i)
		if p.Hostile > 0 && !p.waits(id) && !p.flowOrder(id) && p.large(id) && !p.limits[id] &&
			remotesim.Mix(p.Seed, "hostile", id) < p.Hostile {
			out[id] = len(out) % len(documentClasses)
		}
	}
	return out
}

// hostileBody is large order o with hostile documents, at its size class.
func hostileBody(o shop.Order, seed uint64, class sizeClass) string {
	size := class.body
	if size == 0 {
		size = 4<<10 + int(remotesim.Mix(seed, "documents", o.OrderID)*(600<<10))
	}
	return documentsBody(o, seed, size)
}

// documentsBody is o with a member of hostile documents that makes its
// body, as sent, size bytes.
func documentsBody(o shop.Order, seed uint64, size int) string {
	head, err := hostile.Marshal(o)
	if err != nil {
		panic(err) // an order always marshals
	}
	const member = `,"documents":`
	n := size - len(head) - len(member)
	return head[:len(head)-1] + member + hostile.Quote(hostile.TextQuoted(seed^hashOf(o.OrderID), n)) + "}"
}

// hashOf is a seed of s.
func hashOf(s string) uint64 { return uint64(remotesim.Mix(0, s) * (1 << 53)) }

// hostileApproval is the approval of order id (the i-th) under eventID,
// with a scan of hostile text beside what it approves, at a size class of
// approvalClasses.
func (p Plan) hostileApproval(id string, i int, eventID string) string {
	class := p.approvalClass(id)
	seed := p.Seed ^ hashOf("approval/"+id)
	data := func(scan string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"amountCents":%d,"scan":%s}`, approvedCents(i), scan))
	}
	event := func(scan string) string {
		b, err := hostile.Marshal(message.Event{Kind: message.KindEvent, OrderID: id, Event: approvedEvent, EventID: eventID,
			Data: data(scan)})
		if err != nil {
			panic(err) // strings and valid JSON: no error
		}
		return b
	}
	n := class.kept - len(data(`""`)) + 2
	if class.body > 0 {
		n = class.body - len(event(`""`)) + 2
	}
	return event(hostile.Quote(hostile.TextQuoted(seed, n)))
}

// approvalHostile reports whether the plan sends order id hostile
// approvals.
func (p Plan) approvalHostile(id string) bool {
	return remotesim.Mix(p.Seed, "hostile-approval", id) < p.Hostile
}

// approvalClass is the size class of order id's hostile approvals.
func (p Plan) approvalClass(id string) sizeClass {
	return approvalClasses[int(remotesim.Mix(p.Seed, "approval-class", id)*float64(len(approvalClasses)))]
}

// hostileKey is a customer named prefix made a hostile key of n bytes
// (from the plan's seed and the name).
func (p Plan) hostileKey(prefix string, n int) string {
	return prefix + "-" + hostile.Text(p.Seed^hashOf(prefix), n-len(prefix)-1)
}

// hotCustomer is the k-th hot customer: the first of them, the plan's
// share of them (at least one in a hostile run), a hostile key of
// keyBytes' k-th length, so that calls of hostile keys queue in a line.
func (p Plan) hotCustomer(k int) string {
	name := fmt.Sprintf("hot-%d", k)
	if float64(k) >= math.Ceil(p.Hostile*float64(p.Flow.HotKeys)) {
		return name
	}
	return p.hostileKey(name, keyBytes[k%len(keyBytes)])
}

// coldCustomer is order id's own customer: for the plan's share, a
// hostile key of one of keyBytes' lengths (by the order's hash).
func (p Plan) coldCustomer(id string) string {
	name := "cold-" + id
	if remotesim.Mix(p.Seed, "hostile-key", name) >= p.Hostile {
		return name
	}
	return p.hostileKey(name, keyBytes[int(remotesim.Mix(p.Seed, "key-bytes", name)*float64(len(keyBytes)))])
}

// orderJSON is o as its sender sends it: <, > and & raw in a hostile
// customer's name.
func orderJSON(o shop.Order) string {
	s, err := hostile.Marshal(o)
	if err != nil {
		panic(err) // an order always marshals
	}
	return s
}

// hostileFaults makes a share of every service's answers hostile
// (remotesim.Faults.Hostile), half of them not JSON: at the default
// result limit and under it, and the large workflow's either side of the
// inline limit, its hostile orders' at their size class.
func (p Plan) hostileFaults(out map[string]remotesim.Faults) {
	if p.Hostile <= 0 {
		return
	}
	for k, f := range out {
		f.Hostile, f.NotJSON = p.Hostile/2, p.Hostile/2
		switch {
		case k == largeAgent || strings.HasPrefix(k, largeAgent+"/"):
			f.ResultSizes = []int{payload.DefaultInline, payload.DefaultInline + 1, p.LargeResult}
			if f.OrderResultBytes == nil {
				f.OrderResultBytes = map[string]int{}
			}
			for id, c := range p.hostiles {
				if documentClasses[c].kept > 0 {
					f.OrderResultBytes[id] = documentClasses[c].kept
				}
			}
		case f.ResultSizes == nil:
			f.ResultSizes = answerSizes
		}
		out[k] = f
	}
}
