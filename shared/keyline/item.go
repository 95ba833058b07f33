package keyline

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
)

// A key's item's attributes.
const (
	attrHolders  = "Holders"
	attrReserved = "Reserved"
	attrWaiting  = "Waiting"
	attrN        = "N"
	attrLimit    = "Limit"
	attrTail     = "Tail"
)

// slotsItem is a key's item as stored.
type slotsItem struct {
	Holders  map[string]int64   `dynamodbav:"Holders"`
	Reserved map[string]int64   `dynamodbav:"Reserved"`
	Waiting  map[string]waiting `dynamodbav:"Waiting"`
	N        int                `dynamodbav:"N"`
	Limit    int                `dynamodbav:"Limit"`
	Tail     int64              `dynamodbav:"Tail"`
}

// waiting is a waiter in line as stored: its number in the line (Seq, from
// Tail), its request, and when it joined.
type waiting struct {
	Seq     int64  `dynamodbav:"s"`
	Request string `dynamodbav:"r"`
	Since   int64  `dynamodbav:"a"`
}

// bytes is about what w takes in the item (its ID twice: a map key, and
// the numbers' and names' overhead).
func (w waiting) bytes(id string) int { return len(id) + len(w.Request) + 32 }

// snapshot is a key's item in one consistent state: as a read, a write's
// result or a failed write's condition check saw it.
type snapshot struct {
	slotsItem
	exists bool
	// current: it has the line's attributes (an item written before the
	// line existed has only Holders and N).
	current bool
	exp     int64 // its time to live (topology.KeyExpires), Unix seconds
}

func decode(raw map[string]types.AttributeValue) (snapshot, error) {
	var it snapshot
	if len(raw) == 0 {
		return it, nil
	}
	if err := attributevalue.UnmarshalMap(raw, &it.slotsItem); err != nil {
		return it, fmt.Errorf("decode: %w", err)
	}
	if v, ok := raw[topology.KeyExpires]; ok {
		if err := attributevalue.Unmarshal(v, &it.exp); err != nil {
			return it, fmt.Errorf("decode its time to live: %w", err)
		}
	}
	_, r := raw[attrReserved]
	_, w := raw[attrWaiting]
	_, t := raw[attrTail]
	it.exists, it.current = true, r && w && t
	return it, nil
}

// line is the waiters' IDs, the first in line first.
func (it snapshot) line() []string {
	ids := make([]string, 0, len(it.Waiting))
	for id := range it.Waiting {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(it.Waiting[a].Seq, it.Waiting[b].Seq), cmp.Compare(a, b))
	})
	return ids
}

// position is id's place in line (1: next), 0 if not in it.
func (it snapshot) position(id string) int {
	w, ok := it.Waiting[id]
	if !ok {
		return 0
	}
	p := 1
	for other, v := range it.Waiting {
		if v.Seq < w.Seq || v.Seq == w.Seq && other < id {
			p++
		}
	}
	return p
}

func (it snapshot) waiter(id string) Waiter {
	w := it.Waiting[id]
	return Waiter{ID: id, Request: json.RawMessage(w.Request), Since: time.UnixMilli(w.Since).UTC()}
}

// next is the earliest end after now of a hold or a reservation (zero if
// none).
func (it snapshot) next(now time.Time) time.Time {
	var next int64
	for _, m := range []map[string]int64{it.Holders, it.Reserved} {
		for _, end := range m {
			if end > now.UnixMilli() && (next == 0 || end < next) {
				next = end
			}
		}
	}
	if next == 0 {
		return time.Time{}
	}
	return time.UnixMilli(next).In(now.Location())
}

// room says whether the line takes a waiter of b bytes more.
func (it snapshot) room(b int) bool {
	if len(it.Waiting) >= MaxWaiters {
		return false
	}
	for id, w := range it.Waiting {
		b += w.bytes(id)
	}
	return b <= MaxLineBytes
}
