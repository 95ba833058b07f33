package kept

import "context"

// What an operator's move of an order (sasctl migrate) keeps again: the
// order's data and its results, rewritten by the move's plan, each kept
// as the one it replaces was (sealed under the order's data key if the
// order is sealed, in the payload bucket if it is large).

// Sealed reports whether v names its order's data key: v is a sealed
// order as kept (or made of one), and what is made of it is sealed too.
func (v Value) Sealed() bool { return v.form.keyed }

// KeepOrder is body, the order's data rewritten, kept as stored, the order
// as it is kept now, was: sealed under the order's own data key (not a new
// one: its results, sealed under it, still open) if it is sealed, with
// head's members beside it (its orderId, workflow and replyQueue) and, in
// a claim check's head, that key; in the payload bucket if it is large,
// under a key of its own (the object of stored stays, as it is, for a
// move that is not written).
func (b *Boundary) KeepOrder(ctx context.Context, orderID string, stored Value, body []byte, head map[string]string) (Value, error) {
	s := Unsealed(body, head)
	if stored.form.keyed {
		key, _, err := b.seals().KeyOf(ctx, orderID, stored.raw)
		if err != nil {
			return Value{}, err
		}
		if s, err = b.sealOrder(key, body, head); err != nil {
			return Value{}, err
		}
	}
	return b.Offload(ctx, orderID, "order", s)
}

// Beside is b keeping what it keeps in the bucket v's claim check names,
// if it names one: what is made of an order is kept beside it, and its
// readers refuse a claim check that names another bucket.
func (b *Boundary) Beside(v Value) *Boundary {
	if v.Bucket() == "" || b.store() == nil || v.Bucket() == b.store().Bucket() {
		return b
	}
	return New(b.payloads.In(v.Bucket()), b.sealer)
}
