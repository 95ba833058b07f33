package kept

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/workflow"
)

// Inputs are what a step's document is made of, as kept (statestore.Store's
// Inputs): its order and the results of the records done in its round.
type Inputs struct {
	OrderID string
	// Record names the step's record in an error (statestore.Step.Key).
	Record  string
	Order   Value
	Results []Part
}

// Part is a result of a record done in the round, as kept.
type Part struct {
	Name  string // the record's action: its name in the document's results
	Item  int    // a forEach step's item (1-based); 0: a step's own result
	Items int    // a forEach step's items (0: not one): its results are listed, in order, under Name
	Value Value
	// Own marks an undo's own step's result: the document's Result too.
	Own bool
}

// Opened is a step's document, its values read back and opened, and
// whether its order's data is sealed: then nothing said of it (a reason, a
// service's answer quoted) quotes any of it.
type Opened struct {
	workflow.Document
	Sealed bool
}

// Readable says whether b can open order's data: a sealed order met by a
// boundary with no data key (its function's configuration lags its
// deployment's, which gained it a moment ago) is a *seal.Error (NoKey),
// before anything is read (16 MB, each time).
func (b *Boundary) Readable(orderID string, order Value) error {
	if !b.Seals() && order.form.keyed {
		return &seal.Error{OrderID: orderID, NoKey: true, Reason: "this function has no data key (dataKey) to open it"}
	}
	return nil
}

// Document is the document in: the order, and the results of the records
// done in the round, by name (a forEach step's, a list of its items'); for
// an undo action, its step's result too. Each is read back and opened
// (Open), what it weighs reserved first of the budget of ctx's reservation
// (Reserving: none outside an attempt). A value gone or altered is a
// *payload.Error; a document over the budget, a *DocumentError.
func (b *Boundary) Document(ctx context.Context, in Inputs) (Opened, error) {
	return b.document(ctx, in, false)
}

// DocumentToStream is Document with the values kept in the payload bucket
// left unread, their claim checks in their place, for an Agent to stream
// them to its service as it sends them (Input), and reserving of its
// budget only what it reads. A sealed order's values (its results are
// sealed too) are read and opened (a boundary with no data key cannot: a
// *seal.Error, never its ciphertext streamed), and so are a forEach step's
// items' results, which its list joins; an order not sealed streams,
// whether b seals or not (one stored before its deployment sealed data, or
// after it stopped).
func (b *Boundary) DocumentToStream(ctx context.Context, in Inputs) (Opened, error) {
	return b.document(ctx, in, !in.Order.form.keyed)
}

func (b *Boundary) document(ctx context.Context, in Inputs, stream bool) (Opened, error) {
	doc := Opened{Document: workflow.Document{Order: in.Order.raw, Results: map[string]json.RawMessage{}}, Sealed: in.Order.form.keyed}
	streamed := func(v Value, listed bool) bool { return stream && !listed && v.form.ref != nil }
	// What it weighs read back, reserved of its Agent's budget before it is
	// read (none outside an Agent's attempt or a timer's start).
	weigh := func(v Value, listed bool) int64 {
		if streamed(v, listed) {
			return int64(len(v.raw))
		}
		return v.Weight()
	}
	weight := weigh(in.Order, false)
	for _, p := range in.Results {
		weight += weigh(p.Value, p.Items > 0)
	}
	if err := reserve(ctx, weight); err != nil {
		return doc, err
	}
	read := func(v Value, listed bool) (json.RawMessage, error) {
		if streamed(v, listed) {
			return v.raw, nil
		}
		return b.Open(ctx, in.OrderID, v)
	}
	order, err := read(in.Order, false)
	if err != nil {
		return doc, fmt.Errorf("the order of %s: %w", in.Record, err)
	}
	doc.Order = order
	lists := map[string][]json.RawMessage{} // a forEach step's result: its items', in order
	for _, p := range in.Results {
		raw, err := read(p.Value, p.Items > 0)
		if err != nil {
			return doc, fmt.Errorf("the result of %s: %w", p.Name, err)
		}
		if n := p.Items; n > 0 {
			if lists[p.Name] == nil {
				lists[p.Name] = make([]json.RawMessage, n)
			}
			if p.Item <= n {
				lists[p.Name][p.Item-1] = raw
			}
		} else {
			doc.Results[p.Name] = raw
		}
		if p.Own {
			doc.Result = raw
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
