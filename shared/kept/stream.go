package kept

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/workflow"
)

// Input is a step's input sent as a stream: its document, whose values kept
// in the payload bucket (a 16 MB order, a 16 MB result) are read back as
// they are sent, never held whole by the Agent. Each Open reads it from
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

// Objects is how many of the input's parts are read back from the payload
// bucket as it is sent.
func (in *Input) Objects() int { return in.refs }

// piece is a part of an Input: bytes held, or a payload to read back.
type piece struct {
	b   []byte
	ref *payload.Ref
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

// Input is doc (DocumentToStream's) as a stream: the claim checks among its
// parts read back as they are sent; nil if it has none (its parts are sent
// as they are). A check of another order, or of another bucket, is refused
// here (payload.Store.Belongs).
func (b *Boundary) Input(orderID string, doc workflow.Document) (*Input, error) {
	parts, err := doc.Parts()
	if err != nil {
		return nil, err
	}
	in := &Input{store: b.store(), pieces: make([]piece, 0, len(parts))}
	for _, p := range parts {
		ref, err := b.refOf(orderID, Stored(p))
		if err != nil {
			return nil, err
		}
		if ref != nil {
			in.pieces = append(in.pieces, piece{ref: ref})
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
