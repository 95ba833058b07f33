package remotesim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

type verdict int

const (
	apply verdict = iota
	replay
	transient
	permanent
	stall
)

func (s *Simulator) apply(w http.ResponseWriter, r *http.Request) {
	service, action, key := r.PathValue("service"), r.PathValue("action"), r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
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
	var order struct {
		OrderID string `json:"orderId"`
	}
	_ = json.Unmarshal(body, &order)

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
	v, effect := s.decide(service, action, key, order.OrderID, f, time.Now())
	s.mu.Unlock()
	switch v {
	case apply, replay:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"service":%q,"action":%q,"key":%q,"appliedAt":%q}`, service, action, key, effect.AppliedAt.Format(time.RFC3339Nano))
	case transient:
		http.Error(w, service+" temporarily unavailable", http.StatusServiceUnavailable)
	case permanent:
		http.Error(w, service+" refuses "+action+" for order "+order.OrderID, http.StatusUnprocessableEntity)
	case stall:
		<-r.Context().Done() // hang until the caller gives up
	}
}

// decide picks the answer to one call and applies the effect; s.mu is held.
func (s *Simulator) decide(service, action, key, orderID string, f Faults, now time.Time) (verdict, *Effect) {
	id := service + "/" + action + "/" + key
	s.calls[id]++
	n := s.calls[id]
	s.stats.Calls++
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
