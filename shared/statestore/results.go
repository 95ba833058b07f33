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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/kept"
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
	it.Text, it.Zipped = packed(r.JSON)
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

// packed is a result as its item keeps it: deflated (zipped), if it is
// large enough that deflating it saves, or as it is (text).
func packed(b json.RawMessage) (text string, zipped []byte) {
	if len(b) >= deflateFrom {
		if z := deflate(b); len(z) < len(b) {
			return "", z
		}
	}
	return string(b), nil
}

func deflate(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression) // a valid level: no error
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// Inputs is what record st's document is made of, as kept (st read as of
// its claim): order, as given, and the results of the records done in the
// round, each marked with its name, and, for a forEach step's item, where
// it goes in its step's list; for an undo action, its step's result is
// marked its own. It reads the results only if some record done has one;
// it reads none of what they hold (shared/kept opens them: Document).
func (s *Store) Inputs(ctx context.Context, st Step, order kept.Value) (kept.Inputs, error) {
	in := kept.Inputs{OrderID: st.OrderID, Record: st.Key(), Order: order}
	if st.Read == nil {
		return in, fmt.Errorf("document of %s: the record has no order read with it", st.Key())
	}
	v := st.Read.it.view()
	if len(v.done) == 0 {
		return in, nil
	}
	results, err := s.Results(ctx, st.OrderID, st.Round)
	if err != nil {
		return in, err
	}
	for _, ref := range v.done {
		if r, ok := results[ref]; ok {
			in.Results = append(in.Results, kept.Part{Name: r.Name, Item: ref.Item, Items: v.items[ref.Index], Value: kept.Stored(r.JSON),
				Own: st.Undo && ref == (workflow.Ref{Index: st.Index, Item: st.Item})})
		}
	}
	return in, nil
}
