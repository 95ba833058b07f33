package statestore

import (
	"bytes"
	"cmp"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/workflow"
)

// A record's result (its service's answer, a Go agent's return value, an
// event's data) is kept in an item of its own beside the order's state item,
// written once, by the one who has it, before the outcome is recorded: the
// hot state item, which every transition rewrites, only marks that a result
// exists (so a linear order whose steps answer nothing writes nothing more,
// and readers read only when there is something to read).

// Result is one record's result.
type Result struct {
	OrderID string
	Ref     workflow.Ref
	Name    string // the record's action, its name in a step's document
	Round   int
	Attempt int    // the attempt that produced it (0: an event's data)
	EventID string // the event that carried it, if any
	JSON    json.RawMessage
	Now     time.Time
	// Lifetime is the longest the order may go on from now (its
	// workflow's Lifetime; 0: that of the default deadline), and Keep its
	// retention (Snapshot.Retention, Step.Retention: Forever; 0: the store's):
	// with a retention, the result expires past the latest end the order
	// can reach, as its orders item does.
	Lifetime, Keep time.Duration
}

// resultItem is a result as stored: key OrderID + "R#" and the record's key.
// A JSON large enough that deflating it saves a write unit is kept
// deflated.
type resultItem struct {
	OrderID string `dynamodbav:"OrderID"`
	SK      string `dynamodbav:"SK"`
	Name    string `dynamodbav:"n"`
	Round   int    `dynamodbav:"Rd"`
	Attempt int    `dynamodbav:"k,omitempty"`
	EventID string `dynamodbav:"eid,omitempty"`
	Text    string `dynamodbav:"v,omitempty"`
	Zipped  []byte `dynamodbav:"z,omitempty"`
	At      int64  `dynamodbav:"C"`
}

const resultPrefix = "R#"

// deflateFrom is the size from which a result is deflated: below it, the
// item is within one write unit whatever it holds.
const deflateFrom = 768

// PutResult stores a record's result, unless a later attempt's (or, for an
// event's data, another event's of the same round) is there: then ErrStale.
// An attempt's result is written once: a second write of the same attempt
// (a duplicate callback, a redelivery) keeps the first and returns nil, so
// a result read after the record completed never changes. A result stored
// by an attempt whose outcome is then refused as stale is overwritten by the
// attempt that completes the record.
func (s *Store) PutResult(ctx context.Context, r Result) error {
	it := resultItem{OrderID: r.OrderID, SK: resultPrefix + sortKey(r.Ref), Name: r.Name, Round: max(r.Round, 1),
		Attempt: r.Attempt, EventID: r.EventID, At: ms(r.Now)}
	if len(r.JSON) >= deflateFrom {
		it.Zipped = deflate(r.JSON)
	}
	if it.Zipped == nil || len(it.Zipped) >= len(r.JSON) {
		it.Zipped, it.Text = nil, string(r.JSON)
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encode the result of %s/%s: %w", r.OrderID, sortKey(r.Ref), err)
	}
	if keep := inForce(r.Keep, s.keep); keep > 0 {
		item[ExpiresAttribute] = expires(r.Now.Add(cmp.Or(r.Lifetime, 2*workflow.DefaultOrderDeadline)), keep)
	}
	cond := "attribute_not_exists(SK) OR Rd < :rd OR (Rd = :rd AND k < :k)"
	vals := map[string]types.AttributeValue{":rd": num(int64(it.Round))}
	if r.EventID != "" {
		cond = "attribute_not_exists(SK) OR Rd < :rd OR eid = :eid"
		vals[":eid"] = str(r.EventID)
	} else {
		vals[":k"] = num(int64(r.Attempt))
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.state, Item: item,
		ConditionExpression: aws.String(cond), ExpressionAttributeValues: vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		var old resultItem
		if r.EventID == "" && attributevalue.UnmarshalMap(ccf.Item, &old) == nil && old.Round == it.Round && old.Attempt == r.Attempt {
			return nil // this attempt's result is there already: the first write stands
		}
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("store the result of %s/%s: %w", r.OrderID, sortKey(r.Ref), err)
	}
	return nil
}

// Results returns the results stored for the order's round, by record, read
// consistently: those of records not done too (a stale attempt's, an early
// event's), for the caller to keep what its records say is done.
func (s *Store) Results(ctx context.Context, orderID string, round int) (map[workflow.Ref]Result, error) {
	out := map[workflow.Ref]Result{}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName: &s.state, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("OrderID = :id AND begins_with(SK, :r)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(orderID), ":r": str(resultPrefix)},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the results of %s: %w", orderID, err)
		}
		for _, item := range page.Items {
			var it resultItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return nil, fmt.Errorf("decode a result of %s: %w", orderID, err)
			}
			if it.Round != max(round, 1) {
				continue
			}
			r, err := it.result()
			if err != nil {
				return nil, err
			}
			out[r.Ref] = r
		}
	}
	return out, nil
}

func (it resultItem) result() (Result, error) {
	r := Result{OrderID: it.OrderID, Ref: refOf(it.SK[len(resultPrefix):]), Name: it.Name, Round: it.Round,
		Attempt: it.Attempt, EventID: it.EventID, JSON: json.RawMessage(it.Text), Now: fromMs(it.At)}
	if it.Zipped != nil {
		b, err := io.ReadAll(flate.NewReader(bytes.NewReader(it.Zipped)))
		if err != nil {
			return r, fmt.Errorf("inflate the result of %s/%s: %w", it.OrderID, it.SK, err)
		}
		r.JSON = b
	}
	return r, nil
}

// read is a payload of an order as its steps read it (Read).
func (s *Store) read(ctx context.Context, orderID string, raw json.RawMessage) (json.RawMessage, error) {
	return Read(ctx, s.payloads, s.sealer, orderID, raw)
}

// InProductForm reports whether raw is in the product's own stored form:
// sealed, or a claim check (what only the product makes, and Read reads).
func InProductForm(raw []byte) bool { return payload.IsCheck(raw) || seal.IsSealed(raw) }

// Read is a payload of an order as its steps read it: read back from p's
// bucket if a claim check names it there, opened by x if sealed (read
// back, in the buffer it was read into: it takes no more than its claim
// check's bytes, payload.Weight).
func Read(ctx context.Context, p *payload.Store, x *seal.Sealer, orderID string, raw json.RawMessage) (json.RawMessage, error) {
	ref, ok, err := p.RefOf(orderID, raw)
	if err != nil {
		return nil, err
	}
	if !ok {
		return x.Open(ctx, orderID, raw) // raw is the caller's: left as it is
	}
	b, err := p.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return x.OpenInPlace(ctx, orderID, b)
}

// SameOrder reports whether stored, an order as the product stored it
// (itself, its claim check, or sealed, in p's bucket, under x's key), is
// body: by its bytes, or its claim check's hash, or, sealed, once read.
func SameOrder(ctx context.Context, p *payload.Store, x *seal.Sealer, orderID, stored, body string) (bool, error) {
	if payload.Same(stored, []byte(body)) {
		return true, nil
	}
	if !seal.IsSealed([]byte(stored)) && !strings.Contains(stored, seal.KeyMember) {
		return false, nil
	}
	plain, err := Read(ctx, p, x, orderID, json.RawMessage(stored))
	if err != nil {
		return false, err
	}
	return string(plain) == body, nil
}

func deflate(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression) // a valid level: no error
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// Document is the document of record r of an order whose state item is it
// (read as of the claim): the order, and the results of the records done in
// the round, by name; for an undo action, its step's result too. It reads
// the results only if some record done has one.
//
// A payload kept in the payload bucket (the order, a result: their claim
// checks, shared/payload) is read back; one gone or altered is a
// *payload.Error.
func (s *Store) Document(ctx context.Context, st Step, order json.RawMessage) (workflow.Document, error) {
	return s.document(ctx, st, order, false)
}

// DocumentToStream is Document with the payloads kept in the payload bucket
// left unread, their claim checks in their place, for its Agent to stream
// them to its service as it sends them (payload.Store.Open), and reserving
// of its budget only what it reads. A sealed order's (seal.Covers: its
// results are sealed too) are read and opened (a store with no sealer
// cannot: a *seal.Error, never its ciphertext streamed), and so are a
// forEach step's items' results, which its list joins; an order not sealed
// streams, whether the store has a sealer or not (one stored before its
// deployment sealed data, or after it stopped).
func (s *Store) DocumentToStream(ctx context.Context, st Step, order json.RawMessage) (workflow.Document, error) {
	return s.document(ctx, st, order, !seal.Covers(order))
}

func (s *Store) document(ctx context.Context, st Step, order json.RawMessage, stream bool) (workflow.Document, error) {
	doc := workflow.Document{Order: order, Results: map[string]json.RawMessage{}}
	if st.Read == nil {
		return doc, fmt.Errorf("document of %s: the record has no order read with it", st.Key())
	}
	v := st.Read.it.view()
	var results map[workflow.Ref]Result
	if len(v.done) > 0 {
		var err error
		if results, err = s.Results(ctx, st.OrderID, st.Round); err != nil {
			return doc, err
		}
	}
	// What it weighs read back, reserved of its Agent's budget before it is
	// read (payload.Reserve: none outside an Agent's attempt).
	streamed := func(raw json.RawMessage, listed bool) bool { return stream && !listed && payload.IsCheck(raw) }
	weigh := func(raw json.RawMessage, listed bool) int64 {
		if streamed(raw, listed) {
			return int64(len(raw))
		}
		return payload.Weight(raw)
	}
	weight := weigh(order, false)
	for _, ref := range v.done {
		if r, ok := results[ref]; ok {
			weight += weigh(r.JSON, v.items[ref.Index] > 0)
		}
	}
	if err := payload.Reserve(ctx, weight); err != nil {
		return doc, err
	}
	read := func(raw json.RawMessage, listed bool) (json.RawMessage, error) {
		if streamed(raw, listed) {
			return raw, nil
		}
		return s.read(ctx, st.OrderID, raw)
	}
	order, err := read(order, false)
	if err != nil {
		return doc, fmt.Errorf("the order of %s: %w", st.Key(), err)
	}
	doc.Order = order
	if len(v.done) == 0 {
		return doc, nil
	}
	lists := map[string][]json.RawMessage{} // a forEach step's result: its items', in order
	for _, ref := range v.done {
		r, ok := results[ref]
		if !ok {
			continue
		}
		if r.JSON, err = read(r.JSON, v.items[ref.Index] > 0); err != nil {
			return doc, fmt.Errorf("the result of %s: %w", r.Name, err)
		}
		if n := v.items[ref.Index]; n > 0 {
			if lists[r.Name] == nil {
				lists[r.Name] = make([]json.RawMessage, n)
			}
			if ref.Item <= n {
				lists[r.Name][ref.Item-1] = r.JSON
			}
		} else {
			doc.Results[r.Name] = r.JSON
		}
		if st.Undo && ref == (workflow.Ref{Index: st.Index, Item: st.Item}) {
			doc.Result = r.JSON
		}
	}
	for name, items := range lists {
		doc.Results[name] = joined(items)
	}
	return doc, nil
}

// joined is the JSON array of a forEach step's items' results, each as it
// was kept (null: an item done with no answer): byte for byte, so that the
// list weighs what its items weighed (json.Marshal would write each '<',
// '>' and '&' as six bytes, and compact each item).
func joined(items []json.RawMessage) json.RawMessage {
	n := 1 + len(items)
	for _, v := range items {
		n += max(len(v), len("null"))
	}
	b := append(make([]byte, 0, n), '[')
	for k, v := range items {
		if k > 0 {
			b = append(b, ',')
		}
		if v == nil {
			v = json.RawMessage("null")
		}
		b = append(b, v...)
	}
	return append(b, ']')
}
