package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// The calls in flight per key (workflow.Agent.PerKey) are an item of the
// state table per agent and key value: Holders maps each attempt that holds a
// slot to when its hold ends (its CompleteBy), and N counts them, every write
// changing both at once under a condition. A hold that is not let go (its
// Agent crashed) ends at its time: the next call that finds the key full
// removes it, so no crash leaks a slot.

// MaxKeyBytes is the longest key value kept as it is in its item's sort key;
// a longer one is kept as its SHA-256.
const MaxKeyBytes = 200

// slotsIdle is how long a key's item outlives its last hold (DynamoDB's time
// to live removes it): one per customer is not kept for ever.
const slotsIdle = 24 * time.Hour

func slotsSK(key string) string {
	if len(key) > MaxKeyBytes {
		sum := sha256.Sum256([]byte(key))
		return "key#" + hex.EncodeToString(sum[:])
	}
	return "key/" + key
}

// Holder names an attempt holding a slot: the order, its record, the round
// and the attempt.
func Holder(orderID string, ref workflow.Ref, round, attempt int) string {
	return fmt.Sprintf("%s/%d.%t.%d#%d.%d", orderID, ref.Index, ref.Undo, ref.Item, round, attempt)
}

// Slot is a slot an attempt holds: its agent, its key and its holder.
type Slot struct{ Agent, Key, Holder string }

// Hold is what Store.Hold found.
type Hold struct {
	Held bool
	// Holders is how many hold the key's slots (when not Held: all of them).
	Holders int
	// Next, when not Held, is the earliest time a holder's hold ends by
	// itself (its CompleteBy): a slot is free by then at the latest.
	Next time.Time
}

// slotsItem is a key's item as stored.
type slotsItem struct {
	Holders map[string]int64 `dynamodbav:"Holders"`
	N       int              `dynamodbav:"N"`
}

// Hold takes one of the limit slots of agent's key for holder (an attempt)
// until until, if one is free at now; a holder that holds one already holds
// it still. A hold whose time has passed is removed on the way.
func (s Store) Hold(ctx context.Context, agent, key string, limit int, holder string, until, now time.Time) (Hold, error) {
	k := agentKey(agent, slotsSK(key))
	exp := &types.AttributeValueMemberN{Value: strconv.FormatInt(until.UnixMilli(), 10)}
	ttl := &types.AttributeValueMemberN{Value: strconv.FormatInt(until.Add(slotsIdle).Unix(), 10)}
	one := &types.AttributeValueMemberN{Value: "1"}
	var ccf *types.ConditionalCheckFailedException
	for range 4 {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: k,
			UpdateExpression:         aws.String("SET Holders.#h = :until, N = N + :one, #exp = :ttl"),
			ConditionExpression:      aws.String("N < :limit AND attribute_not_exists(Holders.#h)"),
			ExpressionAttributeNames: map[string]string{"#h": holder, "#exp": topology.KeyExpires},
			ExpressionAttributeValues: map[string]types.AttributeValue{":until": exp, ":one": one, ":ttl": ttl,
				":limit": &types.AttributeValueMemberN{Value: strconv.Itoa(limit)}}})
		if err == nil {
			return Hold{Held: true}, nil
		}
		if !errors.As(err, &ccf) {
			return Hold{}, fmt.Errorf("hold a slot of agent %s's key %q: %w", agent, key, err)
		}
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: k, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return Hold{}, fmt.Errorf("read agent %s's key %q: %w", agent, key, err)
		}
		if len(out.Item) == 0 { // the key's first hold
			item := map[string]types.AttributeValue{
				"Holders":           &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{holder: exp}},
				"N":                 one,
				topology.KeyExpires: ttl,
			}
			for name, v := range k {
				item[name] = v
			}
			_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item,
				ConditionExpression: aws.String("attribute_not_exists(N)")})
			if err == nil {
				return Hold{Held: true}, nil
			}
			if !errors.As(err, &ccf) {
				return Hold{}, fmt.Errorf("hold a slot of agent %s's key %q: %w", agent, key, err)
			}
			continue // another call made it first
		}
		var it slotsItem
		if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
			return Hold{}, fmt.Errorf("decode agent %s's key %q: %w", agent, key, err)
		}
		if _, ok := it.Holders[holder]; ok {
			return Hold{Held: true, Holders: it.N}, nil
		}
		h := Hold{Holders: it.N}
		freed := false
		for other, end := range it.Holders {
			endAt := time.UnixMilli(end)
			if endAt.After(now) {
				if h.Next.IsZero() || endAt.Before(h.Next) {
					h.Next = endAt
				}
				continue
			}
			ok, err := s.letGo(ctx, k, other, &types.AttributeValueMemberN{Value: strconv.FormatInt(end, 10)})
			if err != nil {
				return Hold{}, fmt.Errorf("end an expired hold of agent %s's key %q: %w", agent, key, err)
			}
			freed = freed || ok
		}
		if !freed && it.N >= limit {
			return h, nil
		}
		// A slot was freed, or one was let go between the write and the
		// read: try again.
	}
	return Hold{}, fmt.Errorf("hold a slot of agent %s's key %q: its holders changed under each of 4 tries", agent, key)
}

// Let gives holder's slot of agent's key back (nothing if it holds none: let
// go already, or its hold ended and was removed).
func (s Store) Let(ctx context.Context, agent, key, holder string) error {
	if _, err := s.letGo(ctx, agentKey(agent, slotsSK(key)), holder, nil); err != nil {
		return fmt.Errorf("let go a slot of agent %s's key %q: %w", agent, key, err)
	}
	return nil
}

// letGo removes holder from the item at k, if it holds a slot (until it
// ends at end, if end is set). It reports whether it did.
func (s Store) letGo(ctx context.Context, k map[string]types.AttributeValue, holder string, end types.AttributeValue) (bool, error) {
	in := &dynamodb.UpdateItemInput{TableName: &s.table, Key: k,
		UpdateExpression:          aws.String("REMOVE Holders.#h SET N = N - :one"),
		ConditionExpression:       aws.String("attribute_exists(Holders.#h)"),
		ExpressionAttributeNames:  map[string]string{"#h": holder},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}
	if end != nil { // an expired hold: removed only if it is still that one
		in.ConditionExpression = aws.String("Holders.#h = :end")
		in.ExpressionAttributeValues[":end"] = end
	}
	_, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	return err == nil, err
}

// Holders is who holds agent's key's slots, and until when.
func (s Store) Holders(ctx context.Context, agent, key string) (map[string]time.Time, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: agentKey(agent, slotsSK(key)),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read agent %s's key %q: %w", agent, key, err)
	}
	var it slotsItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return nil, fmt.Errorf("decode agent %s's key %q: %w", agent, key, err)
	}
	holders := make(map[string]time.Time, len(it.Holders))
	for h, end := range it.Holders {
		holders[h] = time.UnixMilli(end).UTC()
	}
	return holders, nil
}
