package statestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
)

// An order's searchable fields (workflow.Definition.Search) are kept as
// index items of the state table, written in its submission's transaction:
// one per field the order has a value of, keyed
// topology.SearchPartition(field, name) and the order's id, and
// holding nothing else but its expiry (the orders item's: the index item
// goes with the order). A Query of one partition reads the orders of one
// value and no other item; the scans of the state items (lists, census)
// skip them by their sort key, and they carry no deadline-index key.

// searchItems are the index items of sub's searchable fields, expiring at
// exp (nil: never).
func searchItems(table string, sub Submission, exp types.AttributeValue) []types.TransactWriteItem {
	var out []types.TransactWriteItem
	for _, field := range slices.Sorted(maps.Keys(sub.Search)) {
		item := key(topology.SearchPartition(field, sub.Search[field]), sub.OrderID)
		if exp != nil {
			item[ExpiresAttribute] = exp
		}
		out = append(out, types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: item}})
	}
	return out
}

// searchPos is a place in a field search: the name searched (an index of
// the names), and the order id read last under it.
type searchPos struct {
	Name    int    `json:"n"`
	OrderID string `json:"o,omitempty"`
}

// WithField returns up to limit ids of the orders whose searchable field is kept as one of names (a value has one name, or
// several in a sealed deployment whose search secret changed), from the
// page token next ("" for the first page); the token returned is "" after
// the last page. It reads the field's index items of those names only (a
// Query each, keys only): a page costs in proportion to the orders found.
// An id may name an order whose state item is gone (kept longer, its
// index item expires with its orders item).
func (s *Store) WithField(ctx context.Context, field string, names []string, limit int, next string) ([]string, string, error) {
	pos, err := decodeSearchToken(next, len(names))
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	var ids []string
	for pos.Name < len(names) && len(ids) < limit {
		page, last, err := s.fieldPage(ctx, topology.SearchPartition(field, names[pos.Name]), pos.OrderID, limit-len(ids))
		if err != nil {
			return nil, "", fmt.Errorf("search by %s: %w", field, err)
		}
		ids = append(ids, page...)
		if last == "" {
			pos = searchPos{Name: pos.Name + 1}
		} else {
			pos.OrderID = last
		}
	}
	if pos.Name >= len(names) {
		return ids, "", nil
	}
	b, _ := json.Marshal(pos)
	return ids, base64.RawURLEncoding.EncodeToString(b), nil
}

// fieldPage reads up to limit order ids of partition after the id after
// ("" from its start), and the id to go on after ("" at its end).
func (s *Store) fieldPage(ctx context.Context, partition, after string, limit int) ([]string, string, error) {
	b := x.New()
	e, err := condition(b, x.Equal(b.Plain(topology.KeyOrderID), b.String(partition)))
	if err != nil {
		return nil, "", err
	}
	in := &dynamodb.QueryInput{TableName: &s.state, KeyConditionExpression: &e.Condition,
		ExpressionAttributeValues: e.Values, ProjectionExpression: aws.String(topology.KeySort),
		Limit: aws.Int32(int32(min(limit, 1000)))}
	if after != "" {
		in.ExclusiveStartKey = key(partition, after)
	}
	page, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", err
	}
	var ids []string
	for _, item := range page.Items {
		if id, ok := item[topology.KeySort].(*types.AttributeValueMemberS); ok {
			ids = append(ids, id.Value)
		}
	}
	if page.LastEvaluatedKey == nil {
		return ids, "", nil
	}
	sk, _ := page.LastEvaluatedKey[topology.KeySort].(*types.AttributeValueMemberS)
	if sk == nil || sk.Value == "" {
		return nil, "", fmt.Errorf("a page key without %s", topology.KeySort)
	}
	return ids, sk.Value, nil
}

func decodeSearchToken(token string, names int) (searchPos, error) {
	var p searchPos
	if token == "" {
		return p, nil
	}
	if err := decodeJSONToken(token, &p); err != nil || p.Name < 0 || p.Name >= names {
		return p, fmt.Errorf("%w %q: not one a field search returned", ErrBadPageToken, token)
	}
	return p, nil
}

// decodeJSONToken reads a page token: a place, as JSON, in base64 (URL
// alphabet, no padding).
func decodeJSONToken(token string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
