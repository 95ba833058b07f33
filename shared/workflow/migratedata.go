package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// What a move does to the data an order keeps: a plan may rewrite the
// order's data and the results its steps kept (Transform), each by a jq
// expression run as the order moves, on the values opened (shared/kept
// opens and keeps them again: sealed, in the payload bucket, as before).
// With the order's data read, a move also counts the items of a step that
// runs per item in the version moved to.

// Transform is a plan's rewriting of what an order keeps as it moves.
type Transform struct {
	// Order rewrites the order's data: what it gives keeps the order's
	// id (its id field's member: orderId by default), workflow and
	// replyQueue, and meets this version's schema.
	Order string `json:",omitempty"`
	// Results rewrite, by this version's step name, the result an order
	// kept of that step (of each item, for a step that runs per item): a
	// step that kept none keeps none.
	Results map[string]string `json:",omitempty"`
}

// IsZero reports whether the transform rewrites nothing.
func (t Transform) IsZero() bool { return t.Order == "" && len(t.Results) == 0 }

// check reports what in t does not compile or does not name a step of d.
func (t Transform) check(d Definition) Problems {
	var ps Problems
	if t.Order != "" {
		if _, err := compileJQ(t.Order); err != nil {
			ps = append(ps, Problem{Field: "migrate.transform.order", What: err.Error()})
		}
	}
	for _, name := range sortedKeys(t.Results) {
		field := "migrate.transform.results." + name
		if d.Index(name) < 0 {
			ps = append(ps, Problem{Field: field, What: fmt.Sprintf("%q is not a step of this workflow", name)})
		}
		if _, err := compileJQ(t.Results[name]); err != nil {
			ps = append(ps, Problem{Field: field, What: err.Error()})
		}
	}
	return ps
}

// ReadsData reports whether a move to To reads the order's data (Moving's
// Data): to rewrite it, or to count the items of a step that runs per item
// in To and did not in From (or is new).
func (m Moving) ReadsData() bool {
	if m.To.Migrate.Transform.Order != "" {
		return true
	}
	was := map[string]bool{} // by To's name: a step of From that runs per item
	for _, st := range m.From.Steps {
		name := st.Name
		if to, ok := m.To.Migrate.Rename[name]; ok {
			name = to
		}
		was[name] = st.ForEach != ""
	}
	return slices.ContainsFunc(m.To.Steps, func(s Step) bool { return s.ForEach != "" && !was[s.Name] })
}

// keptMembers are the members of an order a transform keeps as they are:
// they name the order (its id field, d's), its workflow and where its
// verdict goes.
func (d Definition) keptMembers() []string { return []string{d.IDMember(), "workflow", "replyQueue"} }

// OrderHead is what the claim check of the order orderID, its data data,
// keeps beside it, as Submission keeps it: its orderId (the product's own
// member, whatever the order's id field: orderID), and its workflow and
// replyQueue, those that are strings.
func OrderHead(orderID string, data json.RawMessage) map[string]string {
	var members struct { // these members only: the rest (up to 16 MB) is not decoded
		Workflow   any `json:"workflow"`
		ReplyQueue any `json:"replyQueue"`
	}
	_ = json.Unmarshal(data, &members) // an order's data is an object: a move checked it
	head := map[string]string{DefaultIDField: orderID}
	head["workflow"], _ = members.Workflow.(string)
	head["replyQueue"], _ = members.ReplyQueue.(string)
	return head
}

// data is the order's data as the move leaves it: Data, rewritten by the
// plan's transform (nil: not read). The error quotes none of the data
// when it is sealed.
func (m Moving) data() (json.RawMessage, error) {
	t := m.To.Migrate.Transform.Order
	if t == "" || m.Data == nil {
		return m.Data, nil
	}
	code, err := compileJQ(t)
	if err != nil {
		return nil, fmt.Errorf("migrate.transform.order: %w", err)
	}
	out, err := evalJSON(code, m.Data, "migrate.transform.order")
	if err != nil {
		return nil, m.unquoted(fmt.Errorf("its data cannot be rewritten: %w", err))
	}
	var was, now map[string]json.RawMessage
	if json.Unmarshal(m.Data, &was) != nil || json.Unmarshal(out, &now) != nil || now == nil {
		return nil, errors.New("its data rewritten is not a JSON object, as an order must be")
	}
	for _, k := range m.To.keptMembers() {
		if string(was[k]) != string(now[k]) {
			return nil, fmt.Errorf("its data rewritten changes its %s, which names the order: a transform keeps it", k)
		}
	}
	if err := m.To.CheckOrder(out); err != nil {
		return nil, m.unquoted(fmt.Errorf("its data rewritten does not meet version %s's schema: %w", m.To.Version, err))
	}
	return out, nil
}

// unquoted is err, or, the order's data sealed, its text quoting none of
// it (an expression's message, a schema's values).
func (m Moving) unquoted(err error) error {
	if !m.Sealed {
		return err
	}
	var r *Refusal
	if errors.As(err, &r) {
		return errors.New(r.Unquoted)
	}
	return errors.New(QuotingNoData(err))
}

// TransformResult is result, kept by To's step named step, rewritten by
// the plan (ok false: the plan leaves it as it is). The error quotes none
// of it when the order's data is sealed.
func (m Moving) TransformResult(step string, result json.RawMessage) (out json.RawMessage, ok bool, err error) {
	t, ok := m.To.Migrate.Transform.Results[step]
	if !ok {
		return nil, false, nil
	}
	code, err := compileJQ(t)
	if err != nil {
		return nil, true, fmt.Errorf("migrate.transform.results.%s: %w", step, err)
	}
	what := "migrate.transform.results." + step
	if out, err = evalJSON(code, result, what); err != nil {
		return nil, true, m.unquoted(fmt.Errorf("step %s's result cannot be rewritten: %w", step, err))
	}
	if len(out) > m.To.Limit() {
		return nil, true, fmt.Errorf("step %s's result rewritten is %d bytes, over version %s's result limit (%d)", step, len(out), m.To.Version, m.To.Limit())
	}
	return out, true, nil
}

// Transforms reports whether the plan rewrites To's step named step's
// results.
func (m Moving) Transforms(step string) bool {
	_, ok := m.To.Migrate.Transform.Results[step]
	return ok
}

// atWork refuses to rewrite the data of an order with an async call
// accepted and at work: its call was made, and its key's slot taken (a
// perKey key is read from the data), from the data as it was.
func (m Moving) atWork(o Order, refuse func(string, ...any)) {
	if m.To.Migrate.Transform.Order == "" {
		return
	}
	for _, ref := range sortedRefs(o.Recs) {
		if r := o.Recs[ref]; r.State == Processing && r.Accepted {
			refuse("step %s's async call is at work, made from its data as it is: rewrite the data once it is done", r.RecordName())
		}
	}
}

// items are the items of each step of To that runs per item, in data (nil:
// not read); an order whose data gives a step none, or too many, cannot
// move (it could not run it).
func (m Moving) items(data json.RawMessage) (map[int]int, error) {
	if data == nil {
		return nil, nil
	}
	items, err := m.To.Items(data)
	if err != nil {
		return nil, m.unquoted(fmt.Errorf("in version %s, %w", m.To.Version, err))
	}
	return items, nil
}

// checkItems refuses an order whose records of a step that runs per item
// are not as many as the items its data gives (a transform that changes
// the array such a step runs over, once it has records of it).
func (m Moving) checkItems(out Moved, items map[int]int, refuse func(string, ...any)) {
	if items == nil {
		return
	}
	have := map[int]int{}
	for ref := range out.Recs {
		if !ref.Undo && ref.Item > 0 {
			have[ref.Index]++
		}
	}
	for _, j := range slices.Sorted(maps.Keys(have)) {
		if have[j] != items[j] {
			refuse("step %s runs once per item: the order has %d of them and its data, as the move leaves it, %d", m.To.Steps[j].Name, have[j], items[j])
		}
	}
}
