package workflow

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/itchyny/gojq"
)

// Kind is what a step does.
type Kind string

// The kinds of step: an agent calls its service; an event wait parks the
// order until an event arrives (or its timeout); a timer parks it until a
// time. A parked order costs nothing while it waits: no Lambda runs and no
// message circulates; its deadline-index entry says when to look.
const (
	KindAgent Kind = ""
	KindEvent Kind = "event"
	KindTimer Kind = "timer"
)

// Wait is a step that waits for an event: a message on the orders queue
// ({"kind":"event","orderId":...,"event":NAME,...}) whose data becomes the
// step's result.
type Wait struct {
	Event string
	// Timeout bounds the wait from when the step became ready (0: the
	// order's deadline does).
	Timeout time.Duration `json:",omitempty"`
	// Continue: at the timeout the order goes on (the step's result null)
	// rather than failing for good.
	Continue bool `json:",omitempty"`
	// Senders, if any, are the SQS SenderIds whose event the wait takes
	// (Accepts); an event from another is refused.
	Senders []string `json:",omitempty"`
}

// Accepts reports whether the wait takes an event its queue says sender
// sent (SQS's SenderId: an IAM user's unique id, or role-id:session for
// an assumed role). A sender named without a session names every session
// of its role; a wait naming none takes anyone's.
func (w Wait) Accepts(sender string) bool {
	if len(w.Senders) == 0 {
		return true
	}
	for _, s := range w.Senders {
		if sender == s || (!strings.Contains(s, ":") && strings.HasPrefix(sender, s+":")) {
			return true
		}
	}
	return false
}

// Sleep is a timer step: the order goes on after For, or at the time Until
// (a jq expression over the step's document) gives.
type Sleep struct {
	For   time.Duration `json:",omitempty"`
	Until string        `json:",omitempty"`
	until *gojq.Code
}

// Kind is what the step does.
func (s Step) Kind() Kind {
	switch {
	case s.Wait != nil:
		return KindEvent
	case s.Sleep != nil:
		return KindTimer
	default:
		return KindAgent
	}
}

// DefaultResultLimit and MaxResultLimit bound what a step's result may
// weigh, as it is kept (a workflow's resultLimit sets its own, up to the
// maximum). A result over the deployment's inline limit is kept in its
// payload bucket (shared/payload), a claim check in the messages and items
// in its place. The default is Step Functions' 256 KB: an ordinary REST
// answer of a few KB, or a page of a hundred, is not refused (at 4 KB, a
// service answering 5 KB of JSON failed its step for good), and what it
// costs is paid only by an answer that large (docs/cost.md). A deployment
// with no payload bucket keeps at most 64 KB of any result, and refuses a
// larger one saying so.
const (
	DefaultResultLimit = 256 << 10
	MaxResultLimit     = MaxPayloadBytes
)

// Lifetime is the longest an order of this workflow may go on from any
// moment of a round: the rest of the round (at most its deadline), one
// hold that ends by itself (its longest holdFor: a hold stops the round's
// deadline, and an operator's decision that ends one counts from then
// again), then its compensation (as long as a round). What it keeps, its
// items and its payloads, must outlive it.
func (d Definition) Lifetime() time.Duration {
	var hold time.Duration
	for _, st := range d.Steps {
		hold = max(hold, st.HoldFor)
	}
	return 2*cmp.Or(d.Deadline, DefaultOrderDeadline) + hold
}

// Limit is the most bytes a step's result may have in this workflow.
func (d Definition) Limit() int {
	if d.ResultLimit > 0 {
		return d.ResultLimit
	}
	return DefaultResultLimit
}

// Document is what a step's input is computed from: the order, and the
// results of the records done before it, by name; for an undo action, its
// own step's result too.
type Document struct {
	Order   json.RawMessage            `json:"order"`
	Results map[string]json.RawMessage `json:"results"`
	Result  json.RawMessage            `json:"result,omitempty"` // an undo's step's
	// Item and Index, for a forEach step's record (and its undo's): its item
	// of the order's array, and its position in it (from 0).
	Item  json.RawMessage `json:"item,omitempty"`
	Index *int            `json:"index,omitempty"`
}

// InputFor is what the action's service receives for doc: the document
// itself, or what the action's input expression makes of it.
func (a Action) InputFor(doc Document) (json.RawMessage, error) {
	if a.Input == "" {
		return doc.JSON()
	}
	code, err := a.code()
	if err != nil {
		return nil, err
	}
	return evalDoc(code, doc, fmt.Sprintf("%s's input", a.Name))
}

// JSON is the document as its step's service receives it: its Parts, in
// one buffer of its size.
func (doc Document) JSON() (json.RawMessage, error) {
	parts, err := doc.Parts()
	if err != nil {
		return nil, err
	}
	return bytes.Join(parts, nil), nil
}

// Parts are the document's JSON in pieces, whose concatenation is the
// document: its payloads as they are, not copied (each valid JSON: an order
// checked at Submission, a result kept only if valid, a payload read back
// checked against its hash), between the few bytes that join them. An
// HTTP agent sends them one after another; json.Marshal would compact a
// copy, twice the memory of a 32 MB document.
func (doc Document) Parts() ([][]byte, error) {
	raw := func(v json.RawMessage) []byte {
		if len(v) == 0 {
			return []byte("null")
		}
		return v
	}
	parts := [][]byte{[]byte(`{"order":`), raw(doc.Order), []byte(`,"results":{`)}
	for i, name := range slices.Sorted(maps.Keys(doc.Results)) {
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			k = append([]byte{','}, k...)
		}
		parts = append(parts, append(k, ':'), raw(doc.Results[name]))
	}
	parts = append(parts, []byte{'}'})
	if len(doc.Result) > 0 {
		parts = append(parts, []byte(`,"result":`), doc.Result)
	}
	if len(doc.Item) > 0 {
		parts = append(parts, []byte(`,"item":`), doc.Item)
	}
	if doc.Index != nil {
		parts = append(parts, strconv.AppendInt([]byte(`,"index":`), int64(*doc.Index), 10))
	}
	return append(parts, []byte{'}'}), nil
}

// InputParts is InputFor in pieces: the document's Parts, not joined, for
// an action with no input expression; else the expression's value.
func (a Action) InputParts(doc Document) ([][]byte, error) {
	if a.Input == "" {
		return doc.Parts()
	}
	in, err := a.InputFor(doc)
	return [][]byte{in}, err
}

// value is the document decoded for jq, member by member.
func (doc Document) value() (any, error) {
	decode := func(v json.RawMessage) (any, error) {
		var out any
		if len(v) == 0 {
			return nil, nil
		}
		err := json.Unmarshal(v, &out)
		return out, err
	}
	var err error
	m := map[string]any{}
	if m["order"], err = decode(doc.Order); err != nil {
		return nil, fmt.Errorf("the order: %w", err)
	}
	results := make(map[string]any, len(doc.Results))
	for name, r := range doc.Results {
		if results[name], err = decode(r); err != nil {
			return nil, fmt.Errorf("the result of %s: %w", name, err)
		}
	}
	m["results"] = results
	if len(doc.Result) > 0 {
		if m["result"], err = decode(doc.Result); err != nil {
			return nil, fmt.Errorf("its step's result: %w", err)
		}
	}
	if len(doc.Item) > 0 {
		if m["item"], err = decode(doc.Item); err != nil {
			return nil, fmt.Errorf("its item: %w", err)
		}
	}
	if doc.Index != nil {
		m["index"] = float64(*doc.Index)
	}
	return m, nil
}

// code is the compiled input expression (compiled on first use for a
// definition read back from a store).
func (a Action) code() (*gojq.Code, error) {
	if a.input != nil {
		return a.input, nil
	}
	return compileJQ(a.Input)
}

// When is when a timer step made ready at readyAt ends, for its document.
func (s Sleep) When(readyAt time.Time, doc Document) (time.Time, error) {
	if s.Until == "" {
		return readyAt.Add(s.For), nil
	}
	code := s.until
	if code == nil {
		var err error
		if code, err = compileJQ(s.Until); err != nil {
			return time.Time{}, err
		}
	}
	out, err := evalDoc(code, doc, "until")
	if err != nil {
		return time.Time{}, err
	}
	return parseTime(out)
}

// parseTime reads a time an until expression gave: an RFC 3339 string
// (with its UTC offset: a time without one is no instant), or Unix seconds.
// What is neither is an *ExpressionError.
func parseTime(v json.RawMessage) (time.Time, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err == nil {
			return t, nil
		}
		if _, local := time.Parse("2006-01-02T15:04:05.999999999", s); local == nil {
			return time.Time{}, &ExpressionError{What: "until", Reason: fmt.Sprintf("%.100q has no UTC offset (end it with Z or one like +01:00)", s)}
		}
		return time.Time{}, &ExpressionError{What: "until", Reason: fmt.Sprintf("%.100q is not an RFC 3339 time", s)}
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}, &ExpressionError{What: "until", Reason: fmt.Sprintf("%.100s is neither an RFC 3339 time nor Unix seconds", v)}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// Compile compiles the definition's expressions (ParseFile does; a
// definition decoded from JSON needs it).
func (d *Definition) Compile() error {
	for i := range d.Steps {
		st := &d.Steps[i]
		for _, a := range []*Action{&st.Action, st.Undo} {
			if a == nil || a.Input == "" {
				continue
			}
			code, err := compileJQ(a.Input)
			if err != nil {
				return fmt.Errorf("workflow %q: %s's input: %w", d.Name, a.Name, err)
			}
			a.input = code
		}
		if st.Sleep != nil && st.Sleep.Until != "" {
			code, err := compileJQ(st.Sleep.Until)
			if err != nil {
				return fmt.Errorf("workflow %q: %s's until: %w", d.Name, st.Name, err)
			}
			st.Sleep.until = code
		}
		if st.ForEach != "" && !forEachRE.MatchString(st.ForEach) {
			code, err := compileJQ(st.ForEach)
			if err != nil {
				return fmt.Errorf("workflow %q: %s's forEach: %w", d.Name, st.Name, err)
			}
			st.forEach = code
		}
	}
	if len(d.Schema) > 0 && d.schema == nil {
		sch, err := compileSchema(d.Schema, schemaName(d.File, d.SchemaFile))
		if err != nil {
			return fmt.Errorf("workflow %q's schema: %w", d.Name, err)
		}
		d.schema = sch
	}
	return nil
}

// WaitFor returns the step that waits for the named event, if any.
func (d Definition) WaitFor(event string) (int, bool) {
	for i, st := range d.Steps {
		if st.Wait != nil && st.Wait.Event == event {
			return i, true
		}
	}
	return -1, false
}
