package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/itchyny/gojq"
)

// An expression of a workflow (a step's input, a timer's until, a forEach
// path) runs over a document the order's submitter shapes, in an Agent or a
// Scheduler that handles a batch of ten messages in 128 MB. Its run is
// bounded, so that it fails its own step and harms no other message:
//   - in time, MaxJQTime: a run out of time may be a starved CPU, so it is
//     ErrExpressionTimeout, and the step is tried again;
//   - in what it builds: a string or an array over MaxJQValueBytes made by
//     `*` or `+` (`"x" * 300000000` would take 300 MB at once) is refused
//     before it is made: an ExpressionError, as is any error of the
//     expression itself: the step is refused, no retry mends it;
//   - in what it gives: its value over MaxJQOutputBytes once encoded, the
//     bytes that travel (a step's input to its service), is refused before
//     it is encoded (encodedLen). A value an expression selects is a part
//     of its document, which is counted already (an order and each result
//     up to 16 MB); a value it makes is bounded as it is made, above, and
//     by what its process allocates, below;
//   - in what its process allocates while it runs: over MaxJQAllocBytes
//     (jqAllocBound in an instrumented build), the run is stopped. Runs are one at a time, but the other attempts
//     of a batch go on meanwhile (one reading a 16 MB payload back, or a
//     16 MB answer), and Go counts allocations by process, not by
//     goroutine: it may be theirs, not the run's, so it is tried again as
//     a run out of time is (ErrExpressionTimeout). A run that passes it by
//     itself fails its step once its attempts are spent (an input, a key);
//     a timer's until, at its order's deadline.
const (
	MaxJQTime        = time.Second
	MaxJQValueBytes  = 1 << 20
	MaxJQOutputBytes = MaxPayloadBytes
	MaxJQAllocBytes  = 64 << 20
)

// MaxPayloadBytes is the largest payload (shared/payload's MaxBytes): an
// order, a step's result, an event's data, a step's input.
const MaxPayloadBytes = 16 << 20

// ErrExpressionTimeout is an expression's run that took over MaxJQTime,
// or whose process allocated over its bound while it ran: either
// may be the machine's doing (a starved CPU, the batch's other attempts),
// not the expression's, and its step is tried again.
var ErrExpressionTimeout = errors.New("the expression ran out of time")

// ExpressionError is an expression that fails on its document: an error of
// its own, a value it cannot give, or a bound it passes.
type ExpressionError struct{ What, Reason string }

func (e *ExpressionError) Error() string { return e.What + ": " + e.Reason }

// SealedExpressionReason is what the reason a step of a sealed order fails
// with says in place of a jq expression's own message, which may quote what
// it met of the order's data.
const SealedExpressionReason = "it failed on the order's data (its message is not kept: the order's data is sealed)"

// QuotingNoData is err's text with the message of the jq expression it
// holds, if any (an *ExpressionError's), put as SealedExpressionReason:
// the reason a step of a sealed order fails with, which quotes none of its
// data.
func QuotingNoData(err error) string {
	var expr *ExpressionError
	if !errors.As(err, &expr) {
		return err.Error()
	}
	return strings.Replace(err.Error(), expr.Error(), expr.What+": "+SealedExpressionReason, 1)
}

// errTooMuch stops a run whose process allocated over jqAllocBound
// while it ran: it is ErrExpressionTimeout (tried again).
var errTooMuch error = tooMuch{}

type tooMuch struct{}

func (tooMuch) Error() string {
	return fmt.Sprintf("it (or its process meanwhile) allocated over %d MB: tried again", jqAllocBound>>20)
}

func (tooMuch) Is(target error) bool { return target == ErrExpressionTimeout }

// compileJQ compiles a jq expression, its `*` and `+` bounded (boundOps).
func compileJQ(src string) (*gojq.Code, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("jq: %w", err)
	}
	boundOps(reflect.ValueOf(q))
	code, err := gojq.Compile(q, gojq.WithFunction(boundedOp[gojq.OpMul], 2, 2, bounded(gojq.OpMul)),
		gojq.WithFunction(boundedOp[gojq.OpAdd], 2, 2, bounded(gojq.OpAdd)))
	if err != nil {
		return nil, fmt.Errorf("jq: %w", err)
	}
	return code, nil
}

// boundedOp names the function a bounded operator is rewritten to.
var boundedOp = map[gojq.Operator]string{gojq.OpMul: "_sas_mul", gojq.OpAdd: "_sas_add"}

// boundOps rewrites, in the parsed query v, every `l * r` and `l + r` into
// a call of its bounded function with l and r (gojq has no hook on what an
// operator allocates).
func boundOps(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if q, ok := v.Interface().(*gojq.Query); ok {
			if name, ok := boundedOp[q.Op]; ok && q.Left != nil && q.Right != nil {
				*q = gojq.Query{Meta: q.Meta, Imports: q.Imports, FuncDefs: q.FuncDefs, Term: &gojq.Term{Type: gojq.TermTypeFunc,
					Func: &gojq.Func{Name: name, Args: []*gojq.Query{q.Left, q.Right}}}}
			}
		}
		boundOps(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				boundOps(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			boundOps(v.Index(i))
		}
	}
}

// plainOps computes an operator as gojq does, on [l, r].
var plainOps = func() map[gojq.Operator]*gojq.Code {
	ops := map[gojq.Operator]*gojq.Code{}
	for op, src := range map[gojq.Operator]string{gojq.OpMul: ".[0] * .[1]", gojq.OpAdd: ".[0] + .[1]"} {
		q, err := gojq.Parse(src)
		if err != nil {
			panic(err)
		}
		if ops[op], err = gojq.Compile(q); err != nil {
			panic(err)
		}
	}
	return ops
}()

// bounded is operator op, refusing a string or an array it would make over
// MaxJQValueBytes (an array's elements counted at 16 bytes, as Go holds
// them) before making it.
func bounded(op gojq.Operator) func(any, []any) any {
	return func(_ any, args []any) any {
		l, r := args[0], args[1]
		if n := madeBytes(op, l, r); n > MaxJQValueBytes {
			return fmt.Errorf("%s would make a value of %.0f bytes, over the %d-byte bound", op, n, MaxJQValueBytes)
		}
		v, _ := plainOps[op].Run([]any{l, r}).Next()
		return v
	}
}

// madeBytes is about how many bytes l op r makes, for the values that can
// grow: a string repeated, strings or arrays joined.
func madeBytes(op gojq.Operator, l, r any) float64 {
	if op == gojq.OpMul {
		if _, ok := r.(string); ok {
			l, r = r, l
		}
		s, ok := l.(string)
		n, isNum := gojq.ToFloat64(r)
		if ok && isNum {
			return float64(len(s)) * n
		}
		return 0
	}
	size := func(v any) float64 {
		switch x := v.(type) {
		case string:
			return float64(len(x))
		case []any:
			return 16 * float64(len(x))
		}
		return 0
	}
	return size(l) + size(r)
}

// jqRuns are expression runs, one at a time (see MaxJQAllocBytes).
var jqRuns sync.Mutex

// evalJSON runs code over the JSON document b and returns its one value,
// within the bounds above; what names the expression in its errors.
func evalJSON(code *gojq.Code, b []byte, what string) (json.RawMessage, error) {
	var in any
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	return eval(code, in, what)
}

// evalDoc runs code over doc: each of its members decoded on its own, with
// no copy of the whole document as JSON (16 MB of order and 16 MB of a
// result before it would be 32 MB more of the Agent's memory).
func evalDoc(code *gojq.Code, doc Document, what string) (json.RawMessage, error) {
	in, err := doc.value()
	if err != nil {
		return nil, err
	}
	return eval(code, in, what)
}

// eval runs code over the decoded document in.
func eval(code *gojq.Code, in any, what string) (json.RawMessage, error) {
	jqRuns.Lock()
	defer jqRuns.Unlock()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, MaxJQTime, ErrExpressionTimeout)
	defer stop()
	watched := make(chan struct{})
	defer close(watched)
	go watchAllocs(watched, cancel)
	v, err := one(code.RunWithContext(ctx, in))
	switch {
	case err != nil && ctx.Err() != nil:
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errTooMuch):
			return nil, fmt.Errorf("%s: %w", what, cause)
		case errors.Is(cause, ErrExpressionTimeout):
			return nil, fmt.Errorf("%s: %w (%s)", what, ErrExpressionTimeout, MaxJQTime)
		}
		return nil, &ExpressionError{What: what, Reason: context.Cause(ctx).Error()}
	case err != nil:
		return nil, &ExpressionError{What: what, Reason: err.Error()}
	}
	if _, ok := encodedLen(v, MaxJQOutputBytes); !ok {
		return nil, &ExpressionError{What: what, Reason: fmt.Sprintf("it gave more than %d bytes once encoded, the most a payload may be",
			MaxJQOutputBytes)}
	}
	out, err := gojq.Marshal(v)
	if err != nil {
		return nil, &ExpressionError{What: what, Reason: err.Error()}
	}
	return out, nil
}

// one is the iterator's one value.
func one(iter gojq.Iter) (any, error) {
	v, ok := iter.Next()
	if !ok {
		return nil, errors.New("the expression gave no value")
	}
	if err, isErr := v.(error); isErr {
		return nil, err
	}
	if _, more := iter.Next(); more {
		return nil, errors.New("the expression gave more than one value")
	}
	return v, nil
}

// jqAllocBound is what a run's process may allocate while it runs:
// MaxJQAllocBytes in a production build, and jqAllocScale times that in
// one the compiler instruments (go test -race; -msan, -asan). There gojq's
// string length, string slices and match offsets allocate four bytes a
// character that a production build does not allocate at all: the compiler
// counts len([]rune(s)) in place, but not when it instruments (nor with
// -gcflags=-N, which has no build tag to tell). A bound that stops a race
// build where a production one goes on failed a test's 16 MB order that a
// deployment runs: the chaos run's order at the limits, on CI.
const jqAllocBound = MaxJQAllocBytes * jqAllocScale

// watchAllocs stops the run (cancel, errTooMuch) once the process has
// allocated jqAllocBound since it began, until done.
func watchAllocs(done <-chan struct{}, cancel context.CancelCauseFunc) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	start := sample[0].Value.Uint64()
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			metrics.Read(sample)
			if sample[0].Value.Uint64()-start > jqAllocBound {
				cancel(errTooMuch)
				return
			}
		}
	}
}
