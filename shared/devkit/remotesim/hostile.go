package remotesim

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/devkit/hostile"
)

// The content types of the answers.
const (
	jsonType = "application/json"
	xmlType  = "application/xml"
)

// answer is what the service answers an applied call (async: calls back
// with) under f, and its content type: the effect padded to about its
// size, or for a share of the keys (Faults.Hostile, Faults.NotJSON) made
// of what encoders change, at exactly its size as kept.
func answer(e *Effect, f Faults, async bool) ([]byte, string) {
	if n, ok := f.OrderResultBytes[e.OrderID]; ok {
		f.ResultBytes = n
	}
	x := Mix(0, "hostile-answer", e.Key)
	if x >= f.NotJSON+f.Hostile {
		return answerOf(e, f), jsonType
	}
	size := f.ResultBytes
	if _, ok := f.OrderResultBytes[e.OrderID]; !ok && len(f.ResultSizes) > 0 {
		size = f.ResultSizes[int(Mix(0, "result-size", e.Key)*float64(len(f.ResultSizes)))]
	}
	if x < f.NotJSON && !async {
		return textAnswer(e, size), xmlType
	}
	return hostileAnswer(e, size), jsonType
}

// Answer is what the service answered (and answers again) the calls of
// the applied effect e that were not async, and its content type.
func (s *Simulator) Answer(e Effect) ([]byte, string) {
	s.mu.Lock()
	f := s.faultsOf(e.Service, e.Action)
	s.mu.Unlock()
	return answer(&e, f, false)
}

// hostileSeed is the seed of the hostile text of the answer to e.
func hostileSeed(e *Effect) uint64 { return uint64(Mix(0, "hostile", e.Key) * (1 << 53)) }

// hostileAnswer is the effect as JSON, with a text member of hostile
// characters (raw <, >, &, escaped control characters…) that makes it
// exactly size bytes; the effect alone if size leaves no room for one.
func hostileAnswer(e *Effect, size int) []byte {
	head := effectHead(e)
	const member = `,"text":`
	n := size - len(head) - len(member)
	if n < 2 {
		return head
	}
	b := append(head[:len(head)-1:len(head)-1], member...)
	b = append(b, hostile.Quote(hostile.TextQuoted(hostileSeed(e), n))...)
	return append(b, '}')
}

// textAnswer is the effect as XML around raw control bytes, invalid UTF-8
// and markup: not JSON, and exactly size bytes once encoding/json quotes
// it (the form the product keeps it in); the XML alone if that is longer.
func textAnswer(e *Effect, size int) []byte {
	prefix := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<answer service=%q action=%q key=%q applied=%q>",
		e.Service, e.Action, e.Key, e.AppliedAt.Format(time.RFC3339Nano))
	const suffix = "</answer>\n"
	n := size - (hostile.MarshalLen([]byte(prefix+suffix)) - 2)
	if n < 2 {
		return []byte(prefix + suffix)
	}
	return append(append([]byte(prefix), hostile.BodyMarshalled(hostileSeed(e), n)...), suffix...)
}

// effectHead is the effect as the JSON every answer starts with.
func effectHead(e *Effect) []byte {
	head, _ := json.Marshal(struct {
		Service   string `json:"service"`
		Action    string `json:"action"`
		Key       string `json:"key"`
		AppliedAt string `json:"appliedAt"`
	}{e.Service, e.Action, e.Key, e.AppliedAt.Format(time.RFC3339Nano)}) // strings: no error
	return head
}
