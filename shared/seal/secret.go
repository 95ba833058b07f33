package seal

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// A secret is a deployment's own, not an order's: the secret an agent names
// the keys of its calls in flight with (keyname.Namer), so that a key's value,
// its order's data, is not kept in clear. It is made and opened as an
// order's data key is, its owner's name in an order id's place in the
// encryption context: a function's role that may make or open the data key
// of one owner name (infra's conditions on kms:EncryptionContext:orderId)
// may make or open only that secret, and no order's key.

// NewSecret is a new secret of owner's, 32 random bytes from KMS, and it
// encrypted under the Sealer's key, to be kept.
func (s *Sealer) NewSecret(ctx context.Context, owner string) (plain, blob []byte, err error) {
	k, err := s.NewKey(ctx, owner)
	if err != nil {
		return nil, nil, err
	}
	return k.plain, k.blob, nil
}

// OpenSecret is owner's secret that blob keeps. A blob that is not
// owner's, or not under the Sealer's key (the deployment's key was changed
// since it was made), is an *Error: no try again opens it.
func (s *Sealer) OpenSecret(ctx context.Context, owner string, blob []byte) ([]byte, error) {
	k, err := s.keyOf(ctx, owner, blob)
	var other *types.IncorrectKeyException
	if errors.As(err, &other) {
		return nil, &Error{OrderID: owner, Reason: "its key is not under the deployment's key (KMS: incorrect key)"}
	}
	if err != nil {
		return nil, err
	}
	return k.plain, nil
}

// KeyID names the Sealer's KMS key as it was given ("": it only opens).
func (s *Sealer) KeyID() string { return s.keyID }
