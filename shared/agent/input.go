package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Input is a step's input sent as a stream: its document, whose payloads
// kept in the payload bucket (a 16 MB order, a 16 MB result) are read back
// as they are sent, never held whole by the Agent. Each Open reads it from
// its start (a try again, a transport's retry); a payload that is gone or
// not as kept fails the read before its last byte (payload.Store.Open), so
// that a service that reads the Size it was told never has a whole input
// other than the step's.
type Input struct {
	// Size is the input's length in bytes.
	Size int64

	pieces []piece
	refs   int // the pieces read back from the bucket
	store  *payload.Store
	mu     sync.Mutex
	err    error // what the reads of its last opening met (nil: nothing)
}

// piece is a part of an Input: bytes held, or a payload to read back.
type piece struct {
	b   []byte
	ref *payload.Ref
}

// Streamer is a Remote that can take a step's input as a stream. The HTTP
// agent is one (without credentials, which may sign the body: then its
// input is read first); an Agent in Go may be one too, to take inputs
// larger than it would hold.
type Streamer interface {
	Remote
	// ApplyInput is Apply with the input as a stream: read it from in.Open,
	// to its end before acting on it (its last byte comes once its
	// payloads are checked; a read error means it is not the step's, and
	// the call is taken as not made, whatever ApplyInput answers).
	ApplyInput(ctx context.Context, action, key string, in *Input) ([]byte, error)
}

// Open is the input from its start. It opens every payload it names first,
// so that one gone fails here, before any byte is sent; the reader
// returned closes them.
func (in *Input) Open(ctx context.Context) (io.ReadCloser, error) {
	in.mu.Lock()
	in.err = nil
	in.mu.Unlock()
	readers := make([]io.Reader, 0, len(in.pieces))
	var open []io.Closer
	for _, p := range in.pieces {
		if p.ref == nil {
			readers = append(readers, bytes.NewReader(p.b))
			continue
		}
		r, err := in.store.Open(ctx, *p.ref)
		if err != nil {
			for _, c := range open {
				c.Close()
			}
			in.note(err)
			return nil, err
		}
		open = append(open, r)
		readers = append(readers, &noting{r: r, in: in})
	}
	return &opened{Reader: io.MultiReader(readers...), closers: open}, nil
}

// Err is what the reads of the input's last opening met: nil if they met
// nothing (or it was read to its end). A call that failed while its input
// did was not made: its service never had the whole of it.
func (in *Input) Err() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.err
}

func (in *Input) note(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil {
		in.err = err
	}
}

// noting is a piece's reader that notes its error in its input.
type noting struct {
	r  io.Reader
	in *Input
}

func (n *noting) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		n.in.note(err)
	}
	return k, err
}

type opened struct {
	io.Reader
	closers []io.Closer
}

func (o *opened) Close() error {
	for _, c := range o.closers {
		c.Close()
	}
	return nil
}

// InputError is a call not made because its input could not be read as it
// was sent (a payload of it gone, altered, or S3 failing): its service did
// not have the whole of it.
type InputError struct{ Err error }

func (e *InputError) Error() string {
	return fmt.Sprintf("its input was not read as it was sent: %v", e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// documentStreamer is a Store that leaves the payloads of a step's document
// in the bucket, for its call to stream (statestore.Store is one).
type documentStreamer interface {
	DocumentToStream(ctx context.Context, st statestore.Step, order json.RawMessage) (workflow.Document, error)
}

// streams reports whether the attempt's input goes to its service as a
// stream: its service takes one, its input is its whole document (no input
// expression, no forEach item, no key of calls in flight: each of those
// reads the document), and its store leaves the payloads for it to read.
func (h *Handler) streams(st *statestore.Step, a workflow.Action) (documentStreamer, bool) {
	if h.payloads == nil || a.Input != "" || st.Item > 0 || h.cfg.PerKey != nil {
		return nil, false
	}
	if r, ok := h.remote.(*HTTPRemote); ok && r.Auth != nil {
		return nil, false
	}
	if _, ok := h.remote.(Streamer); !ok {
		return nil, false
	}
	ds, ok := h.store.(documentStreamer)
	return ds, ok
}

// streamed is the document's parts as an Input: the claim checks among them
// read back as they are sent; nil if it has none (its parts are sent as
// they are). A check of another order, or of another bucket, is refused
// here (payload.Store.RefOf).
func (h *Handler) streamed(st *statestore.Step, doc workflow.Document) (*Input, error) {
	parts, err := doc.Parts()
	if err != nil {
		return nil, err
	}
	in := &Input{store: h.payloads, pieces: make([]piece, 0, len(parts))}
	refs := 0
	for _, p := range parts {
		ref, ok, err := h.payloads.RefOf(st.OrderID, p)
		if err != nil {
			return nil, err
		}
		if ok {
			in.pieces = append(in.pieces, piece{ref: &ref})
			in.Size += int64(ref.Bytes)
			refs++
			continue
		}
		in.pieces = append(in.pieces, piece{b: p})
		in.Size += int64(len(p))
	}
	if refs == 0 {
		return nil, nil
	}
	in.refs = refs
	return in, nil
}
