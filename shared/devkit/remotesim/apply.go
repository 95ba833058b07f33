package remotesim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

type verdict int

const (
	apply verdict = iota
	replay
	transient
	permanent
	stall
	throttled
)

// status is the HTTP status a verdict answers a call with (0: none, the
// call hangs), for the call log.
func (v verdict) status(async bool) int {
	switch {
	case v == stall && async:
		return http.StatusAccepted
	case v == apply || v == replay:
		if async {
			return http.StatusAccepted
		}
		return http.StatusOK
	case v == transient:
		return http.StatusServiceUnavailable
	case v == permanent:
		return http.StatusUnprocessableEntity
	case v == throttled:
		return http.StatusTooManyRequests
	}
	return 0
}

func (s *Simulator) apply(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	service, action, key := r.PathValue("service"), r.PathValue("action"), r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20)) // a step's input at the limits: 16 MB of order, 16 MB a result
	if err != nil || key == "" {
		http.Error(w, "need a body and an Idempotency-Key header", http.StatusBadRequest)
		return
	}
	if g := s.guardOf(service); g != nil {
		if err := g(r, body); err != nil {
			s.mu.Lock()
			s.stats.Unauthorized++
			s.mu.Unlock()
			http.Error(w, service+": unauthorized: "+err.Error(), http.StatusUnauthorized)
			return
		}
	}
	orderID, _, _ := strings.Cut(key, "/") // a key is the order's id, the action's name and the round
	token := r.Header.Get("X-Callback-Token")

	s.mu.Lock()
	f := s.faultsOf(service, action)
	latency := f.Latency
	if f.SlowRate > 0 && s.rng.Float64() < f.SlowRate {
		latency += f.SlowLatency
		s.stats.Slow++
	}
	s.mu.Unlock()
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return // the caller gave up: nothing is applied
		}
	}

	s.mu.Lock()
	v, effect := s.decide(service, action, key, orderID, f, time.Now())
	if v == apply && effect.Input == nil {
		effect.Input = json.RawMessage(body)
	}
	callback := s.callback
	s.logCall(Call{Service: service, Action: action, Key: key, At: arrived, Status: v.status(token != "")})
	s.mu.Unlock()
	s.respond(w, r, v, call{service, action, orderID, token}, effect, f, callback)
}

// call is what names a call: its service and action, its order and, for
// an async call, its callback's token.
type call struct{ service, action, orderID, token string }

// respond answers the call as the simulator decided (v): a 429 with
// Retry-After, an answer (now, or by a callback for an async call), a 503,
// a 422, or nothing until the caller gives up.
func (s *Simulator) respond(w http.ResponseWriter, r *http.Request, v verdict, c call, effect *Effect, f Faults, callback func(Callback)) {
	service, action, orderID, token := c.service, c.action, c.orderID, c.token
	switch {
	case v == throttled:
		w.Header().Set("Retry-After", f.retryAfter())
		http.Error(w, service+": too many requests", http.StatusTooManyRequests)
	case (v == apply || v == replay || v == stall) && token != "" && f.CallbackFirst && v != stall && callback != nil:
		// It calls back before it answers: the callback is on its way
		// before the Agent can note that the call was accepted.
		body, _ := answer(effect, f, true)
		callback(Callback{OrderID: orderID, Token: token, Answer: body})
		time.Sleep(callbackFirstLead)
		w.WriteHeader(http.StatusAccepted)
	case (v == apply || v == replay || v == stall) && token != "":
		w.WriteHeader(http.StatusAccepted) // async: the answer comes with the callback
		if v != stall && callback != nil {
			body, _ := answer(effect, f, true)
			time.AfterFunc(f.CallbackDelay, func() { callback(Callback{OrderID: orderID, Token: token, Answer: body}) })
		}
	case v == apply || v == replay:
		if f.NoResult {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		body, contentType := answer(effect, f, false)
		if contentType != jsonType {
			s.mu.Lock()
			s.stats.NotJSON++
			s.mu.Unlock()
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	case v == transient:
		http.Error(w, service+" temporarily unavailable", http.StatusServiceUnavailable)
	case v == permanent:
		http.Error(w, service+" refuses "+action+" for order "+orderID, http.StatusUnprocessableEntity)
	case v == stall:
		<-r.Context().Done() // hang until the caller gives up
	}

}

// answerOf is what the service answers an applied call: the effect, padded
// with order lines to about f.ResultBytes of JSON (a realistic answer:
// deflating it gains what a real one would). The lines are written as
// they are made, in batches as many as the bytes left need (each about 80
// bytes), then measured again: a 16 MB answer takes 70 ms and 21 MB, not
// the 580 ms and quarter gigabyte its marshalling as a struct took, which
// starved a loaded machine's 16 MB calls past their call timeout
// (BenchmarkAnswerAtTheLimits).
func answerOf(e *Effect, f Faults) json.RawMessage {
	head := effectHead(e)
	if len(head) >= f.ResultBytes {
		return head
	}
	b := append(make([]byte, 0, f.ResultBytes+128), head[:len(head)-1]...)
	b = append(b, `,"lines":[`...)
	for i, size := 0, len(head); size < f.ResultBytes; size = len(b) + len(`]}`) {
		for n := max((f.ResultBytes-size)/100, 1); n > 0; n, i = n-1, i+1 {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLine(b, Mix(uint64(i), e.Key))
		}
	}
	return append(b, `]}`...)
}

// appendLine appends the order line of hash h.
func appendLine(b []byte, h float64) []byte {
	return fmt.Appendf(b, `{"sku":"SKU-%05d","quantity":%d,"unitPriceCents":%d,"location":"aisle-%02d/bin-%03d"}`,
		int(h*1e5), 1+int(h*7), 99+int(h*99_900), int(h*40), int(h*997)%1000)
}

// decide picks the answer to one call and applies the effect; s.mu is held.
func (s *Simulator) decide(service, action, key, orderID string, f Faults, now time.Time) (verdict, *Effect) {
	id := service + "/" + action + "/" + key
	s.calls[id]++
	n := s.calls[id]
	s.stats.Calls++
	if f.throttles(now) {
		s.stats.Throttled++
		return throttled, nil
	}
	lost := slices.Contains(f.LostReplyOrders, orderID)
	if e, ok := s.ledger[id]; ok {
		e.Calls = n
		s.stats.Replayed++
		if lost {
			s.stats.Stalled++
			return stall, e
		}
		return replay, e
	}
	for _, win := range f.Outages {
		if !now.Before(win.From) && now.Before(win.To) {
			s.stats.Transient++
			return transient, nil
		}
	}
	if n <= f.StallFirst || slices.Contains(f.StallOrders, orderID) ||
		(n == 1 && f.StallRate > 0 && s.keyShare("stall", id) < f.StallRate) {
		s.stats.Stalled++
		return stall, nil
	}
	if f.TransientRate > 0 && s.rng.Float64() < f.TransientRate {
		s.stats.Transient++
		return transient, nil
	}
	if slices.Contains(f.PermanentOrders, orderID) || (f.PermanentRate > 0 && s.keyShare("perm", id) < f.PermanentRate) {
		s.stats.Permanent++
		return permanent, nil
	}
	e := &Effect{Service: service, Action: action, Key: key, OrderID: orderID, AppliedAt: now, Calls: n}
	s.ledger[id] = e
	s.stats.Applied++
	if lost {
		s.stats.Stalled++
		return stall, e
	}
	return apply, e
}

// callbackFirstLead is how long a service that calls back first waits before
// it answers 202: time for the pipeline to take the callback.
const callbackFirstLead = 500 * time.Millisecond
