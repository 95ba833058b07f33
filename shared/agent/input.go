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
	last   *opening // its latest opening
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
	// payloads are checked). An error of ApplyInput's own, other than a
	// *PermanentError or a *SlowDownError, while a read of its input
	// failed, is taken as a call not made: its input was not the step's.
	ApplyInput(ctx context.Context, action, key string, in *Input) ([]byte, error)
}

// Open is the input from its start. Its first payload is opened at once, so
// that an order gone fails here, before any byte is sent; each later one
// when the stream reaches it (S3 need not hold a response open while a
// slow service reads 16 MB before it). The reader returned closes them.
func (in *Input) Open(ctx context.Context) (io.ReadCloser, error) {
	o := &opening{ctx: ctx}
	in.mu.Lock()
	in.last = o
	in.mu.Unlock()
	readers := make([]io.Reader, 0, len(in.pieces))
	first := true
	for _, p := range in.pieces {
		if p.ref == nil {
			readers = append(readers, bytes.NewReader(p.b))
			continue
		}
		r := &lazy{o: o, open: func() (io.ReadCloser, error) { return in.store.Open(ctx, *p.ref) }}
		if first {
			first = false
			if err := r.start(); err != nil {
				o.note(err)
				return nil, err
			}
		}
		readers = append(readers, r)
	}
	o.Reader = io.MultiReader(readers...)
	return o, nil
}

// Err is what the reads of the input's latest opening met, before it was
// closed or its call's context ended: nil if nothing. A call that failed
// while its input did was not made: its service never had the whole of it.
func (in *Input) Err() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.last == nil {
		return nil
	}
	return in.last.failure()
}

// opening is one reading of an Input, from its start.
type opening struct {
	io.Reader
	ctx     context.Context
	mu      sync.Mutex
	err     error       // the first read error met while it was read
	closed  bool        // closed (by its reader: net/http, once done with it)
	closers []io.Closer // the payloads opened
}

// note keeps err as the opening's failure: the first, and only while it
// is read (an error after its Close, or once its call's context ended, is
// of its ending, not of its payloads).
func (o *opening) note(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil && !o.closed && o.ctx.Err() == nil &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		o.err = err
	}
}

func (o *opening) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *opening) Close() error {
	o.mu.Lock()
	o.closed = true
	closers := o.closers
	o.closers = nil
	o.mu.Unlock()
	for _, c := range closers {
		c.Close()
	}
	return nil
}

// lazy is a payload of an opening, opened when first read.
type lazy struct {
	o    *opening
	open func() (io.ReadCloser, error)
	r    io.Reader
}

// start opens the payload, closed with its opening.
func (l *lazy) start() error {
	r, err := l.open()
	if err != nil {
		return err
	}
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	if l.o.closed {
		r.Close()
		return io.ErrClosedPipe
	}
	l.o.closers = append(l.o.closers, r)
	l.r = r
	return nil
}

func (l *lazy) Read(p []byte) (int, error) {
	if l.r == nil {
		if err := l.start(); err != nil {
			l.o.note(err)
			return 0, err
		}
	}
	k, err := l.r.Read(p)
	if err != nil && err != io.EOF {
		l.o.note(err)
	}
	return k, err
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
	for _, p := range parts {
		ref, ok, err := h.payloads.RefOf(st.OrderID, p)
		if err != nil {
			return nil, err
		}
		if ok {
			in.pieces = append(in.pieces, piece{ref: &ref})
			in.Size += int64(ref.Bytes)
			in.refs++
			continue
		}
		in.pieces = append(in.pieces, piece{b: p})
		in.Size += int64(len(p))
	}
	if in.refs == 0 {
		return nil, nil
	}
	return in, nil
}
