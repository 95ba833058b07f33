package remotesim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"testing"
	"time"
)

// fnvMix is Mix as hash/fnv and fmt write it: its reference.
func fnvMix(seed uint64, parts ...string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d", seed)
	for _, p := range parts {
		fmt.Fprintf(h, "/%s", p)
	}
	return finish(h.Sum64())
}

// marshalledAnswer is answerOf as encoding/json writes it, its lines a
// struct's: its reference.
func marshalledAnswer(e *Effect, f Faults) json.RawMessage {
	type line struct {
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
		Cents    int    `json:"unitPriceCents"`
		Location string `json:"location"`
	}
	a := struct {
		Service   string `json:"service"`
		Action    string `json:"action"`
		Key       string `json:"key"`
		AppliedAt string `json:"appliedAt"`
		Lines     []line `json:"lines,omitempty"`
	}{e.Service, e.Action, e.Key, e.AppliedAt.Format(time.RFC3339Nano), nil}
	b, _ := json.Marshal(a)
	for i := 0; len(b) < f.ResultBytes; {
		for n := max((f.ResultBytes-len(b))/100, 1); n > 0; n, i = n-1, i+1 {
			h := fnvMix(uint64(i), e.Key)
			a.Lines = append(a.Lines, line{SKU: fmt.Sprintf("SKU-%05d", int(h*1e5)), Quantity: 1 + int(h*7),
				Cents: 99 + int(h*99_900), Location: fmt.Sprintf("aisle-%02d/bin-%03d", int(h*40), int(h*997)%1000)})
		}
		b, _ = json.Marshal(a)
	}
	return b
}

// An answer is, byte for byte, what encoding/json makes of its effect and
// lines, at every size up to the limits (a 16 MB scan's); and Mix is
// FNV-1a, as hash/fnv computes it, through SplitMix64's finalizer.
func TestAnAnswerIsWhatMarshallingItsLinesGives(t *testing.T) {
	e := &Effect{Service: "archive", Action: "scan-documents", Key: "o-1/scan-documents/1", AppliedAt: time.Now()}
	// The code is the same at every size: 1 MB is 12,000 lines (16 MB as a
	// struct takes seconds under -race; BenchmarkAnswerAtTheLimits makes it).
	for _, n := range []int{-1, 0, 10, 100, 150, 181, 1000, 2 << 10, 100 << 10, 1 << 20} {
		if a, b := answerOf(e, Faults{ResultBytes: n}), marshalledAnswer(e, Faults{ResultBytes: n}); !bytes.Equal(a, b) {
			t.Fatalf("an answer of %d bytes: %d bytes written, %d marshalled", n, len(a), len(b))
		}
	}
	for _, i := range append([]uint64{math.MaxUint64, 1 << 63}, seq(1000)...) {
		if Mix(i, "k", "x") != fnvMix(i, "k", "x") || Mix(i) != fnvMix(i) || Mix(i, "", "commandé", "\x00\xff") != fnvMix(i, "", "commandé", "\x00\xff") {
			t.Fatalf("Mix(%d, ...) is not FNV-1a's", i)
		}
	}
}

// seq is 0 to n-1.
func seq(n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}

// BenchmarkAnswerAtTheLimits is a 16 MB answer made (a limit order's
// scan): go test -run '^$' -bench AnswerAtTheLimits -benchmem ./shared/devkit/remotesim.
func BenchmarkAnswerAtTheLimits(b *testing.B) {
	e := &Effect{Service: "archive", Action: "scan-documents", Key: "o-1/scan-documents/1", AppliedAt: time.Now()}
	for b.Loop() {
		answerOf(e, Faults{ResultBytes: 16<<20 - 4<<10})
	}
}
