package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Input is a step's input sent as a stream (kept.Input): its document,
// whose values kept in the payload bucket are read back as they are sent,
// never held whole by the Agent.
type Input = kept.Input

// Streamer is a Remote that can take a step's input as a stream. The HTTP
// agent is one (without credentials, which may sign the body: then its
// input is read first); an Agent in Go may be one too, to take inputs
// larger than it would hold.
type Streamer interface {
	Remote
	// ApplyInput is Apply with the input as a stream: read it from in.Open,
	// to its end before acting on it (its last byte comes once its
	// payloads are checked). An error of ApplyInput's own, other than a
	// *PermanentError or a *SlowDownError, while a read of its input
	// failed, is taken as a call not made: its input was not the step's.
	ApplyInput(ctx context.Context, action, key string, in *Input) ([]byte, error)
}

// InputError is a call not made because its input could not be read as it
// was sent (a payload of it gone, altered, or S3 failing): its service did
// not have the whole of it.
type InputError struct{ Err error }

func (e *InputError) Error() string {
	return fmt.Sprintf("its input was not read as it was sent: %v", e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// input is the order (from the request, or the orders table for a re-sent
// request) and what the action's service receives: the step's document
// (the order, the results of the records done before it), or what the
// action's input expression makes of it. An expression that fails on the
// document is a *PermanentError: no retry changes it; one out of time is
// workflow.ErrExpressionTimeout.
func (h *Handler) input(ctx context.Context, def workflow.Definition, st *statestore.Step, a workflow.Action,
	sent json.RawMessage) (json.RawMessage, kept.Opened, callInput, error) {
	order := sent
	if len(order) == 0 {
		o, err := h.store.Order(ctx, st.OrderID)
		if err != nil {
			return nil, kept.Opened{}, callInput{}, err
		}
		order = json.RawMessage(o)
	}
	stream := h.streams(st, a)
	doc, err := h.document(ctx, st, kept.Stored(order), stream)
	if unreadable(err) {
		return order, doc, callInput{}, &PermanentError{Status: 0, Body: fmt.Sprintf("%s's input: %v", st.Name, err)}
	}
	if err != nil {
		return order, doc, callInput{}, err
	}
	if stream {
		in, err := h.kept.Input(st.OrderID, doc.Document) // a claim check of another order, or bucket, refused
		if err != nil {
			return order, doc, callInput{}, &PermanentError{Status: 0, Body: fmt.Sprintf("%s's input: %v", st.Name, err)}
		}
		if in != nil {
			return order, doc, callInput{stream: in}, nil
		}
	}
	if st.Item > 0 { // one item of a forEach step: its item, and where it is
		item, err := def.Item(doc.Order, st.Index, st.Item)
		if err != nil {
			return order, doc, callInput{}, &PermanentError{Status: 0, Body: err.Error(), Cause: err}
		}
		index := st.Item - 1
		doc.Item, doc.Index = item, &index
	}
	parts, err := a.InputParts(doc.Document) // the document's own bytes, not copied, when the input is the whole of it
	if errors.Is(err, workflow.ErrExpressionTimeout) {
		return order, doc, callInput{}, err // perhaps a starved CPU: tried again
	}
	if err != nil {
		return order, doc, callInput{}, &PermanentError{Status: 0, Body: err.Error(), Cause: err} // it names the step's input
	}
	return order, doc, callInput{parts: parts}, nil
}

// document is the step's document, as the store keeps what it is made of,
// opened through the boundary: whole, or, to stream, the values in the
// payload bucket left for its call to read as it sends them. A sealed
// order this function cannot open (no data key: its configuration lags its
// deployment's, which gained it a moment ago) is given back before
// anything is read (16 MB, each time).
func (h *Handler) document(ctx context.Context, st *statestore.Step, order kept.Value, stream bool) (kept.Opened, error) {
	if err := h.kept.Readable(st.OrderID, order); err != nil {
		return kept.Opened{}, err
	}
	in, err := h.store.Inputs(ctx, *st, order)
	if err != nil {
		return kept.Opened{}, err
	}
	if stream {
		return h.kept.DocumentToStream(ctx, in)
	}
	return h.kept.Document(ctx, in)
}

// callInput is what a step's service receives: a stream (its document's
// values read back as they are sent), or in pieces held (its document's
// values among them, as read back), which an HTTP agent sends one after
// another, with no copy of a document of up to 33 MB, and an Agent in Go
// gets joined.
type callInput struct {
	parts  [][]byte
	stream *Input
}

// bytes is the input's pieces joined.
func (in callInput) bytes() []byte {
	if len(in.parts) == 1 {
		return in.parts[0]
	}
	return slices.Concat(in.parts...)
}

// streams reports whether the attempt's input goes to its service as a
// stream: its service takes one, its input is its whole document (no input
// expression, no forEach item, no key of calls in flight: each of those
// reads the document), and its values may be in a payload bucket.
func (h *Handler) streams(st *statestore.Step, a workflow.Action) bool {
	if !h.kept.HasBucket() || a.Input != "" || st.Item > 0 || h.cfg.PerKey != nil {
		return false
	}
	if r, ok := h.remote.(*HTTPRemote); ok && r.Auth != nil {
		return false
	}
	_, ok := h.remote.(Streamer)
	return ok
}
