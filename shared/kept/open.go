package kept

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/sas-go/sas/shared/payload"
)

// Open is v, a value of order orderID, whole, as its steps read it: read
// back from the payload bucket if it is a claim check there (checked
// against its size and SHA-256), and opened if it is sealed (read back, in
// the buffer it was read into: it takes no more than its claim check's
// bytes, Weight). A claim check that names another bucket, or another
// order's object, is a *payload.Error, read from nowhere; so is a value
// gone or not as kept. Sealed data that does not open is a *seal.Error. An
// S3 or KMS error otherwise is returned as it is (transient: try again).
func (b *Boundary) Open(ctx context.Context, orderID string, v Value) (json.RawMessage, error) {
	ref, err := b.refOf(orderID, v)
	if err != nil {
		return nil, err
	}
	if ref == nil {
		return b.seals().Open(ctx, orderID, v.raw) // v's bytes are the caller's: left as they are
	}
	raw, err := b.store().Get(ctx, *ref)
	if err != nil {
		return nil, err
	}
	return b.seals().OpenInPlace(ctx, orderID, raw)
}

// refOf is the object v's claim check names (nil: v is inline), if it may
// be read back for order orderID (payload.Store.Belongs).
func (b *Boundary) refOf(orderID string, v Value) (*payload.Ref, error) {
	if v.form.ref == nil {
		return nil, nil
	}
	return v.form.ref, b.store().Belongs(orderID, *v.form.ref)
}

// Unseal is v opened where it is, as an operator reads a record's result:
// sealed inline, opened; otherwise v itself (a claim check is left as it
// is, unread).
func (b *Boundary) Unseal(ctx context.Context, orderID string, v Value) (json.RawMessage, error) {
	return b.seals().Open(ctx, orderID, v.raw)
}

// Same reports whether stored, an order as kept, is body: by its bytes, or
// its claim check's SHA-256, or, sealed, once read back and opened.
func (b *Boundary) Same(ctx context.Context, orderID string, stored Value, body string) (bool, error) {
	if string(stored.raw) == body {
		return true, nil
	}
	if ref := stored.form.ref; ref != nil && ref.Bytes == len(body) {
		sum := sha256.Sum256([]byte(body))
		if strings.EqualFold(hex.EncodeToString(sum[:]), ref.SHA256) {
			return true, nil
		}
	}
	if !stored.form.sealed && !stored.form.keyed {
		return false, nil
	}
	plain, err := b.Open(ctx, orderID, stored)
	if err != nil {
		return false, err
	}
	return string(plain) == body, nil
}

// ErrUnnamed is a body written over as kept (Resealed) whose head names no
// order: it cannot be opened.
var ErrUnnamed = errors.New("its body is sealed, and names no order")

// Resealed is body, read where a sender offloaded it: as it is, or, if
// Submission wrote it over once it took it (offload.Store.Reseal: an order
// as kept, sealed, or the claim check of its sealed data), the order it
// holds, read back and opened by its head's orderId. A boundary with no
// data key takes every body as it is. One whose head names no order is
// ErrUnnamed; one that does not read back or open, an error as Open's.
func (b *Boundary) Resealed(ctx context.Context, body []byte) ([]byte, error) {
	v := Stored(body)
	if !b.Seals() || v.form.ref == nil && !v.form.sealed {
		return body, nil
	}
	var head struct {
		OrderID string `json:"orderId"`
	}
	if json.Unmarshal(body, &head) != nil || head.OrderID == "" {
		return nil, ErrUnnamed
	}
	return b.Open(ctx, head.OrderID, v)
}
