package statestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/workflow"
)

// What a move reads of the order's data and writes of it: a plan that
// rewrites the order's data or its results (workflow.Transform), or a
// version whose steps run per item, needs the order's data opened; the
// values rewritten are kept again through the move's boundary (Move.Kept:
// shared/kept seals and offloads them, the store carries them), and
// written in the move's transaction.

// SentAttribute, on an orders item whose data a move rewrote, is the
// SHA-256 (hex) of the order as first accepted: a resend of it is the
// same order still (Store.WasSent), not one with other content.
const SentAttribute = "Sent"

// moveData is the order's data as a move reads it.
type moveData struct {
	stored string          // the order as its orders item keeps it
	order  kept.Value      // the same, as kept
	data   json.RawMessage // opened (nil: not read)
	kept   *kept.Boundary  // Move.Kept beside the order
}

// moveData reads the order as kept, if the move rewrites what it keeps,
// and opens its data if the move needs it (workflow.Moving.ReadsData),
// with the move's boundary (none: a move that needs the data is refused by
// the rule, saying why).
func (s *Store) moveData(ctx context.Context, m Move, from workflow.Definition) (moveData, error) {
	opens := (workflow.Moving{From: from, To: m.To}).ReadsData()
	if m.Kept == nil && !m.To.Migrate.Transform.IsZero() {
		return moveData{}, &workflow.NotMovableError{Reasons: []string{"the plan rewrites what the order keeps, and this move was given " +
			"nothing to read it with"}}
	}
	if m.Kept == nil || !opens && m.To.Migrate.Transform.IsZero() {
		return moveData{}, nil
	}
	stored, err := s.Order(ctx, m.OrderID) // a result rewritten is sealed if the order is
	if err != nil {
		return moveData{}, err
	}
	d := moveData{stored: stored, order: kept.Stored([]byte(stored))}
	d.kept = m.Kept.Beside(d.order)
	if !opens {
		return d, nil
	}
	d.data, err = d.kept.Open(ctx, m.OrderID, d.order)
	if kept.Broken(err) || kept.NoKey(err) {
		return d, &workflow.NotMovableError{Reasons: []string{fmt.Sprintf("its data cannot be read: %v", err)}}
	}
	if err != nil {
		return d, fmt.Errorf("read the data of %s to move it: %w", m.OrderID, err)
	}
	return d, nil
}

// movedOrder is the write of the order's data rewritten (none: the move
// leaves it as it is), kept as its data was first, on the condition that
// its orders item still holds what was read; dry, the data is rewritten
// (the plan's checks made) and not kept.
func (s *Store) movedOrder(ctx context.Context, m Move, d moveData, data json.RawMessage) ([]types.TransactWriteItem, error) {
	if data == nil || m.DryRun {
		return nil, nil
	}
	v, err := d.kept.KeepOrder(ctx, m.OrderID, d.order, data, workflow.OrderHead(m.OrderID, data))
	if err != nil {
		return nil, fmt.Errorf("keep the data of %s rewritten: %w", m.OrderID, err)
	}
	sum := sha256.Sum256(d.data)
	b := x.New()
	b.Set(b.Name("Order"), b.String(string(v.JSON())))
	b.Set(b.Plain(SentAttribute), x.IfNotExists(b.Plain(SentAttribute), b.String(hex.EncodeToString(sum[:]))))
	b.If(x.Equal(b.Name("Order"), b.String(d.stored)))
	e, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("rewrite the data of %s: %w", m.OrderID, err)
	}
	return []types.TransactWriteItem{{Update: &types.Update{TableName: &s.orders, Key: ordersKey(m.OrderID),
		UpdateExpression: &e.Update, ConditionExpression: &e.Condition, ExpressionAttributeNames: e.Names,
		ExpressionAttributeValues: e.Values}}}, nil
}

// resultRewriter rewrites the results a move's plan names, as kept: read
// back and opened, rewritten, kept again as the order's results are
// (dry: rewritten, to check the plan, and not kept).
type resultRewriter struct {
	m      Move
	moving workflow.Moving
	order  kept.Value
}

// rewrites reports whether the result of record ref (of the version moved
// to) is rewritten.
func (r resultRewriter) rewrites(def workflow.Definition, ref workflow.Ref) bool {
	return !ref.Undo && r.m.Kept != nil && r.moving.Transforms(def.Steps[ref.Index].Name)
}

// rewrite is item, the result of record ref (named name) as stored,
// rewritten: its value replaced, the rest as it was.
func (r resultRewriter) rewrite(ctx context.Context, def workflow.Definition, ref workflow.Ref, name string,
	item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	var it resultItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("decode a result of %s: %w", r.m.OrderID, err)
	}
	res, err := it.result()
	if err != nil {
		return nil, err
	}
	k := r.m.Kept.Beside(r.order).Beside(kept.Stored(res.JSON))
	plain, err := k.Open(ctx, r.m.OrderID, kept.Stored(res.JSON))
	if kept.Broken(err) || kept.NoKey(err) {
		return nil, &workflow.NotMovableError{Reasons: []string{fmt.Sprintf("step %s's result cannot be read: %v", name, err)}}
	}
	if err != nil {
		return nil, fmt.Errorf("read the result of %s's step %s to rewrite it: %w", r.m.OrderID, name, err)
	}
	out, _, err := r.moving.TransformResult(def.Steps[ref.Index].Name, plain)
	if err != nil {
		return nil, &workflow.NotMovableError{Reasons: []string{err.Error()}}
	}
	if r.m.DryRun {
		return item, nil
	}
	sealed, err := k.Seal(ctx, r.m.OrderID, r.order, out)
	if err == nil {
		res.JSON, err = keptJSON(k.Offload(ctx, r.m.OrderID, fmt.Sprintf("results/%s-r%d-moved", name, it.Round), sealed))
	}
	if err != nil {
		return nil, fmt.Errorf("keep %s's step %s's result rewritten: %w", r.m.OrderID, name, err)
	}
	it.Text, it.Zipped = packed(res.JSON)
	rewritten, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode a result of %s: %w", r.m.OrderID, err)
	}
	for k, v := range item { // what the item has besides its result (its expiry)
		if _, ok := rewritten[k]; !ok && k != "v" && k != "z" {
			rewritten[k] = v
		}
	}
	return rewritten, nil
}

func keptJSON(v kept.Value, err error) (json.RawMessage, error) { return v.JSON(), err }

// WasSent reports whether body is the order as first accepted, if a move
// rewrote its data since (the SHA-256 it kept): a resend of that order is
// the order still, not one with other content. Not rewritten, false.
func (s *Store) WasSent(ctx context.Context, orderID, body string) (bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.orders, ConsistentRead: aws.Bool(true),
		Key: ordersKey(orderID), ProjectionExpression: aws.String(SentAttribute)})
	if err != nil {
		return false, fmt.Errorf("read order %s: %w", orderID, err)
	}
	sum := sha256.Sum256([]byte(body))
	return stringOf(out.Item[SentAttribute]) == hex.EncodeToString(sum[:]), nil
}

// numberOf is a number attribute's value (0: none, or not a whole number).
func numberOf(v types.AttributeValue) int {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	k, _ := strconv.Atoi(n.Value)
	return k
}
