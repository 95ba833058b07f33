package statestore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// WriteIDAttribute is the state item's attribute naming the last write that
// changed it (a random id per write): a write the SDK tries again after its
// first try was applied but its answer lost knows itself by it.
const WriteIDAttribute = "W"

// ownWrite reports whether item (as read back, or as a failed condition
// found it) carries write id: the write was applied.
func ownWrite(item map[string]types.AttributeValue, id string) bool {
	w, ok := item[WriteIDAttribute].(*types.AttributeValueMemberS)
	return ok && w.Value == id
}

// writeID is a new write's id: 64 random bits.
func writeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// updateItem runs in, c's UpdateItem of the order's state item. A refusal
// by its condition whose item's write id is c's own is the write itself: an
// earlier try of this request was applied and its answer lost (a connection
// cut while the answer was read; the SDK tries the request again), so the
// item as it is now is the write's outcome. Without this, a claim would
// refuse itself and its step wait for the Supervisor, a completion would be
// taken as stale and its reply never sent.
//
// A write that fails otherwise (the SDK's tries spent: throttled, a 500, a
// connection cut) may have been applied all the same, its answer lost on
// one of them: the item is read back, and if its write id is c's, that is
// the outcome; if not, the error is an *UnknownOutcome carrying the item as
// it is (a claim finds itself there by its record: claimedBy).
func (s *Store) updateItem(ctx context.Context, c *change, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if ownWrite(ccf.Item, c.id) {
			return &dynamodb.UpdateItemOutput{Attributes: ccf.Item}, nil
		}
		return out, err
	}
	if err == nil || ctx.Err() != nil {
		return out, err
	}
	got, rerr := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
	if rerr != nil {
		return out, err // not known: the caller's message comes back, or the Supervisor finds the record
	}
	if ownWrite(got.Item, c.id) {
		return &dynamodb.UpdateItemOutput{Attributes: got.Item}, nil
	}
	return out, &UnknownOutcome{Err: err, Item: got.Item}
}

// UnknownOutcome is a write that failed with an error that does not say
// whether it was applied, and the item as read back after it (another
// write's since, or as it was: not known which).
type UnknownOutcome struct {
	Err  error
	Item map[string]types.AttributeValue
}

func (e *UnknownOutcome) Error() string { return e.Err.Error() }

// Unwrap is the write's error.
func (e *UnknownOutcome) Unwrap() error { return e.Err }
