package chaos

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/payload"
)

// hostilePlan is a plan whose payloads are all hostile, half its orders
// large.
func hostilePlan() Plan {
	p := DefaultPlan(11, 400)
	p.Hostile, p.Large, p.Flow = 1, 0.5, DefaultFlow()
	p.limits = p.limitOrders()
	p.hostiles = p.hostileOrders()
	return p
}

// sqsTakes is whether SQS takes body: valid UTF-8 of the characters it
// allows (no raw control character but tab, line feed, carriage return).
func sqsTakes(body string) bool {
	for i, r := range body {
		if (r == utf8.RuneError && !strings.HasPrefix(body[i:], "\ufffd")) || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') {
			return false
		}
	}
	return true
}

// The hostile large orders are made, in turn, at each size class, exactly,
// on their body as sent: valid JSON that SQS takes, with raw <, > and &
// and escaped control characters, and an order Submission accepts; the
// orders at the limits at 16 MB less 4 KB.
func TestHostileOrdersAreAtTheirSizesAsSent(t *testing.T) {
	p := hostilePlan()
	seen := map[int]int{}
	for i := range p.Orders {
		id := p.orderID(i)
		c, ok := p.hostiles[id]
		if !ok {
			continue
		}
		seen[c]++
		body := p.orderBody(id, i)
		if want := documentClasses[c].body; want > 0 {
			require.Len(t, body, want, documentClasses[c].name)
		}
		require.True(t, json.Valid([]byte(body)))
		require.True(t, sqsTakes(body))
		require.Contains(t, body, "<")
		require.Contains(t, body, `\u00`)
		o, err := message.DecodeOrder(body, nil)
		require.NoError(t, err)
		require.Equal(t, id, o.OrderID)
	}
	require.Len(t, seen, len(documentClasses), "every class in turn")
	for id := range p.limits {
		i := 0
		for p.orderID(i) != id {
			i++
		}
		body := p.orderBody(id, i)
		require.Len(t, body, payload.MaxBytes-4<<10)
		require.Contains(t, body, "<")
	}
}

// A hostile approval is its size class exactly (its data, or its body as
// sent), approves what the plain one does, and SQS takes it.
func TestHostileApprovalsAreAtTheirSizes(t *testing.T) {
	p := hostilePlan()
	classes := map[string]bool{}
	for i := range p.Orders {
		id := p.orderID(i)
		if !p.waits(id) {
			continue
		}
		require.True(t, p.approvalHostile(id))
		body, class := p.approvalOf(id, i, "e-"+id), p.approvalClass(id)
		classes[class.name] = true
		require.True(t, sqsTakes(body))
		e, err := message.DecodeOrdersMessage(body, nil)
		require.NoError(t, err)
		data := e.(message.Event).Data
		if class.body > 0 {
			require.Len(t, body, class.body, class.name)
		} else {
			require.Len(t, data, class.kept, class.name)
		}
		var v struct{ AmountCents int64 }
		require.NoError(t, json.Unmarshal(data, &v))
		require.Equal(t, approvedCents(i), v.AmountCents)
	}
	require.Len(t, classes, len(approvalClasses))
}

// A hostile customer is a key of one of keyBytes' lengths (the longest
// kept as it is, and longer), valid UTF-8, the same for every order of a
// hot customer; a flow order carrying it is one Submission accepts.
func TestHostileKeysAreAtTheirLengths(t *testing.T) {
	p := hostilePlan()
	lengths := map[int]bool{}
	for i := range p.Orders {
		id := p.orderID(i)
		if !p.flowOrder(id) || p.waits(id) {
			continue
		}
		c := p.customerOf(id)
		require.True(t, utf8.ValidString(c))
		lengths[len(c)] = true
		require.Equal(t, c, p.customerOf(id))
		_, err := message.DecodeOrder(p.orderBody(id, i), nil)
		require.NoError(t, err)
	}
	for _, n := range keyBytes {
		require.True(t, lengths[n], "a key of %d bytes", n)
	}
	require.True(t, lengths[keyname.MaxKeyBytes] && lengths[keyname.MaxKeyBytes+1])
}

// Every service answers hostile for the plan's share, half not JSON, at
// the default result limit and under it; the large workflow's either side
// of the inline limit, its hostile orders' at their class.
func TestHostileAnswersAreAtEachLimit(t *testing.T) {
	p := hostilePlan()
	faults := p.faults(time.Now())
	for k, f := range faults {
		require.Equal(t, 0.5, f.Hostile, k)
		require.Equal(t, 0.5, f.NotJSON, k)
		require.NotEmpty(t, f.ResultSizes, k)
	}
	require.Contains(t, faults[largeAgent].ResultSizes, payload.DefaultInline+1)
	for id, c := range p.hostiles {
		if documentClasses[c].kept > 0 {
			require.Equal(t, documentClasses[c].kept, faults[largeAgent].OrderResultBytes[id])
		}
	}
}

// The size watch notes the sends SQS refused and the calls given back for
// a full line, by key, from any logger made from it; the run's log still
// gets its own lines, and no debug ones.
func TestTheSizeWatchNotesRefusalsAndFullLines(t *testing.T) {
	var out bytes.Buffer
	w := newSizeWatch(slog.NewJSONHandler(&out, nil))
	log := slog.New(w).With("function", "agent-keyed")
	log.Debug("call waits", "why", `waiting for a slot of key "hot-1-<&>\"x" (its line is full)`)
	log.Debug("call waits", "why", `waiting for a slot of key "hot-2" (1st in line)`)
	log.Warn("send failed", "err", "InvalidParameterValue: Message must be shorter than 262144 bytes.")
	require.Equal(t, map[string]int{`hot-1-<&>"x`: 1}, w.fullLines())
	require.Equal(t, 1, w.inLine)
	require.Len(t, w.refused, 1)
	require.NotContains(t, out.String(), "call waits")
	require.Contains(t, out.String(), "send failed")

	r := Result{LargestMessage: offload.MaxMessageBytes + 1, LargestItem: maxItemBytes, DeadLetters: map[string]int{},
		Rejected: map[string]int{"invalid message: body is … bytes, over the …-byte limit": 2,
			"invalid message: bad JSON: duplicate object member name …": 3}}
	r.checkSizes(w.watched, nil)
	require.Len(t, r.Violations.OverLimit, 2, "the message, and the send refused; the item at its limit is within it")
	require.Equal(t, []string{`2 rejected as "invalid message: body is … bytes, over the …-byte limit"`}, r.Violations.Refused)
}

// A call given back for a full line is a violation while its key has no
// more orders than a line holds whatever their requests (the run's keys),
// not past that.
func TestAFullLineOfAShortKeyIsRefused(t *testing.T) {
	got := linesRefused(map[string]int{"hot-<1>": 3, "crowded": 9}, map[string]int{"hot-<1>": 4, "crowded": maxShortLine + 1})
	require.Equal(t, []string{`3 calls of key "hot-<1>" (of 4 orders) given back (its line is full)`}, got)
}
