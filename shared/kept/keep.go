package kept

import (
	"context"
	"encoding/base64"
	"maps"

	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
)

// Sealed is a value made ready to keep (Offload): sealed under its order's
// data key if its order is sealed (Seal, SealOrder), or, its order not
// sealed, as it was given (Unsealed); with the members its claim check
// keeps beside it, if it goes to the payload bucket.
type Sealed struct {
	b      []byte
	object bool              // in the sealed object form (not JSON): kept in the bucket whatever its size
	head   map[string]string // its claim check's members beside it (an order's orderId, workflow, replyQueue, data key)
}

// Unsealed is b kept as it is, its claim check with head's members beside
// it (none: nil).
func Unsealed(b []byte, head map[string]string) Sealed { return Sealed{b: b, head: head} }

// Len is the length of what is kept of s: over Boundary.Max, it is refused.
func (s Sealed) Len() int { return len(s.b) }

// Seal is plain, a value made of the order stored as order (its result, an
// event's data), sealed under the order's data key if the order is sealed,
// in the form Offload keeps it in; plain itself otherwise. A sealed order
// met with no data key is a *seal.Error (NoKey): its results are never kept
// in clear.
func (b *Boundary) Seal(ctx context.Context, orderID string, order Value, plain []byte) (Sealed, error) {
	if !order.form.keyed {
		return Unsealed(plain, nil), nil
	}
	key, _, err := b.seals().KeyOf(ctx, orderID, order.raw)
	if err != nil {
		return Sealed{}, err
	}
	return b.seal(key, plain, nil)
}

// SealOrder is an order's body sealed under a data key of its own, new,
// with head's members (its orderId, workflow and replyQueue) beside it in
// clear, and, in its claim check's head, its data key (encrypted under the
// KMS key), so that the key is known without reading the order back.
func (b *Boundary) SealOrder(ctx context.Context, orderID string, body []byte, head map[string]string) (Sealed, error) {
	key, err := b.seals().NewKey(ctx, orderID)
	if err != nil {
		return Sealed{}, err
	}
	return b.sealOrder(key, body, head)
}

// sealOrder is an order's body sealed under its data key k, with head's
// members beside it and, in its claim check's head, k.
func (b *Boundary) sealOrder(k seal.Key, body []byte, head map[string]string) (Sealed, error) {
	s, err := b.seal(k, body, head)
	if err != nil {
		return Sealed{}, err
	}
	s.head = maps.Clone(head)
	s.head[KeyMember] = base64.StdEncoding.EncodeToString(k.Blob())
	return s, nil
}

// seal is plain sealed under k in the form it is kept in: inline, the JSON
// form with head's members beside it, if that fits the inline limit, or if
// there is no payload bucket (a value over Max is refused before it is
// kept); otherwise the object form, which Offload keeps in the bucket
// whatever its size (its plaintext and a few hundred bytes: no base64).
func (b *Boundary) seal(k seal.Key, plain []byte, head map[string]string) (Sealed, error) {
	p := b.store()
	if p == nil || len(plain) <= p.Inline() { // its JSON form is longer: else it cannot fit
		s, err := k.Seal(plain, head)
		if err != nil || p == nil || len(s) <= p.Inline() {
			return Sealed{b: s}, err
		}
	}
	s, err := k.SealObject(plain)
	return Sealed{b: s, object: true}, err
}

// Offload is s as it is kept: as it travels (Wire) if that fits inline,
// and otherwise kept in the payload bucket as what of the order (under its
// key: order, results/<record>-r<round>, events/<name>), its claim check
// in its place, with s's head beside it; s in the sealed object form is
// always kept there. What stays inline is weighed as it travels in a
// message (message.Encode writes a value byte for byte): at most Inline
// bytes on the wire. One that must go to the bucket where there is none
// is an error wrapping ErrNoBucket; one over Max, an error: the caller
// refuses it before.
func (b *Boundary) Offload(ctx context.Context, orderID, what string, s Sealed) (Value, error) {
	if !s.object {
		if wire := Wire(s.b); len(wire) <= b.Inline() {
			return Stored(wire), nil
		}
	}
	ref, err := b.store().Put(ctx, orderID, what, s.b, s.object)
	if err != nil {
		return Value{}, err
	}
	return Stored(payload.Check(ref, s.head)), nil
}

// Covered is data, an event's as kept (Offload), as it may be written over
// the clear copy its sender left in the bucket: itself if it is sealed or
// a claim check; otherwise, the order (read by order, only then) sealed, a
// sealed null. ok is false when the order is not sealed: there is nothing
// to cover.
func (b *Boundary) Covered(ctx context.Context, orderID string, data Value,
	order func(context.Context) (Value, error)) (covered Value, ok bool, err error) {
	if data.form.ref != nil || data.form.sealed {
		return data, true, nil
	}
	o, err := order(ctx)
	if err != nil || !o.form.keyed {
		return Value{}, false, err
	}
	key, _, err := b.seals().KeyOf(ctx, orderID, o.raw)
	if err != nil {
		return Value{}, false, err
	}
	null, err := key.Seal([]byte("null"), nil)
	if err != nil {
		return Value{}, false, err
	}
	return Stored(null), true, nil
}

// Renew writes every value of the order kept in b's bucket again in place,
// so that the bucket's expiry (days after an object's last write) counts
// from now: an order at work again keeps them for its new round. It
// returns how many it wrote.
func (b *Boundary) Renew(ctx context.Context, orderID string) (int, error) {
	return b.store().Renew(ctx, orderID)
}
