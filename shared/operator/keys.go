package operator

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/flow"
)

// MaxKeysShown is how many of an agent's keys in use AgentFlow lists, the
// busiest first (all are counted).
const MaxKeysShown = 50

// KeyInUse is a key of an agent's perKey with calls in flight, a slot
// reserved or calls waiting in its line.
type KeyInUse struct {
	// Key is the key's value, or for a value longer than flow.MaxKeyBytes
	// (stored as its SHA-256 only) "sha256:" and the hash's first digits.
	Key    string `json:"key"`
	Hashed bool   `json:"hashed,omitempty"`
	// Limit is its calls in flight at most (0: not known yet).
	Limit int `json:"limit"`
	// InFlight counts its holders and reservations that have not ended.
	InFlight int `json:"inFlight"`
	// Holders are the calls holding a slot, the earliest to end first.
	Holders []KeyHolder `json:"holders"`
	// Reserved are the calls a slot was handed to and that have not taken
	// it yet, the earliest to lapse first.
	Reserved []KeyHolder `json:"reserved,omitempty"`
	// Waiters is the key's line, its first first.
	Waiters []KeyWaiter `json:"waiters"`
}

// KeyHolder is a call holding a slot of a key (or one reserved for it).
type KeyHolder struct {
	OrderID string `json:"orderId"`
	// ID names the attempt (flow.Holder) or, for a reservation, the call
	// (flow.WaiterID).
	ID string `json:"id"`
	// Until is when its hold ends by itself (its CompleteBy), or its
	// reservation lapses.
	Until time.Time `json:"until"`
	// Ended: Until has passed (its Agent crashed, or its request was
	// lost): the next call to the key removes it.
	Ended bool `json:"ended,omitempty"`
}

// KeyWaiter is a call waiting in a key's line.
type KeyWaiter struct {
	OrderID  string    `json:"orderId"`
	ID       string    `json:"id"`       // the call (flow.WaiterID)
	Since    time.Time `json:"since"`    // when it joined the line
	Position int       `json:"position"` // 1: next
}

// keysInUse fills f's keys in use from what flow.Store.Keys read, at now.
func (f *AgentFlow) keysInUse(in flow.KeysInUse, now time.Time) {
	f.KeysInUse, f.KeyWaiters = in.Count, in.Waiting
	if !in.Oldest.IsZero() {
		f.LongestKeyWait = Duration(max(now.Sub(in.Oldest), 0).Round(time.Second))
	}
	for _, k := range in.Keys {
		f.Keys = append(f.Keys, keyOf(k, now))
	}
}

// keyOf is k as an operator sees it at now.
func keyOf(k flow.KeyInUse, now time.Time) KeyInUse {
	out := KeyInUse{Key: k.Key, Hashed: k.Hashed, Limit: k.Limit, Holders: holders(k.Holders, now),
		Reserved: holders(k.Reserved, now), Waiters: []KeyWaiter{}}
	for _, h := range slices.Concat(out.Holders, out.Reserved) {
		if !h.Ended {
			out.InFlight++
		}
	}
	for i, w := range k.Waiters {
		out.Waiters = append(out.Waiters, KeyWaiter{OrderID: flow.OrderOf(w.ID), ID: w.ID, Since: utc(w.Since), Position: i + 1})
	}
	return out
}

// holders are the holds (or reservations) of m, the earliest to end first.
func holders(m map[string]time.Time, now time.Time) []KeyHolder {
	out := []KeyHolder{}
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, KeyHolder{OrderID: flow.OrderOf(id), ID: id, Until: utc(m[id]), Ended: !m[id].After(now)})
	}
	slices.SortStableFunc(out, func(a, b KeyHolder) int { return cmp.Compare(a.Until.UnixNano(), b.Until.UnixNano()) })
	return out
}
