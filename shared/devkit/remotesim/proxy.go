package remotesim

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The fault proxy puts a service's faults in front of a real service (one
// of your own, which the simulator does not play): a call to
// /v1/proxy/{service}/{action} meets the service's faults as a simulated
// one would (latency, a 503 share, an outage, a 422 share or list, a stall)
// and, if none stops it, is forwarded to the service's own endpoint with its
// body and headers, its answer passed back as it is. The real service keeps
// its own ledger: nothing is recorded here but the counts.

// Proxy puts the fault proxy in front of service, whose own endpoint is
// target (its base URL: an action is POSTed to target/{action}). It returns
// the proxy's path for the service, to put before the action instead of the
// target (under the simulator's URL).
func (s *Simulator) Proxy(service, target string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(target, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("fault proxy for %s: %q is not an http(s) URL", service, target)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxies == nil {
		s.proxies = map[string]*url.URL{}
	}
	s.proxies[service] = u
	return "/v1/proxy/" + service, nil
}

// Proxied are the services behind the fault proxy, and their targets.
func (s *Simulator) Proxied() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, u := range s.proxies {
		out[k] = u.String()
	}
	return out
}

func (s *Simulator) proxy(w http.ResponseWriter, r *http.Request) {
	service, action, key := r.PathValue("service"), r.PathValue("action"), r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	target, ok := s.proxies[service]
	f := s.faultsOf(service, action)
	latency := f.Latency
	if f.SlowRate > 0 && s.rng.Float64() < f.SlowRate {
		latency += f.SlowLatency
		s.stats.Slow++
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no fault proxy for "+service, http.StatusNotFound)
		return
	}
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return // the caller gave up: nothing is forwarded
		}
	}
	orderID, _, _ := strings.Cut(key, "/")
	s.mu.Lock()
	v := s.decideProxy(service, action, key, orderID, f, time.Now())
	s.mu.Unlock()
	switch v {
	case throttled:
		w.Header().Set("Retry-After", f.retryAfter())
		http.Error(w, service+": too many requests (fault proxy)", http.StatusTooManyRequests)
		return
	case transient:
		http.Error(w, service+" temporarily unavailable (fault proxy)", http.StatusServiceUnavailable)
		return
	case permanent:
		http.Error(w, service+" refuses "+action+" for order "+orderID+" (fault proxy)", http.StatusUnprocessableEntity)
		return
	case stall:
		<-r.Context().Done() // hang until the caller gives up; nothing is forwarded
		return
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.URL.Path = strings.TrimSuffix(target.Path, "/") + "/" + action
		pr.Out.URL.RawPath = ""
	}}
	rp.ServeHTTP(w, r)
}

// decideProxy picks what the proxy does with one call: a fault, or apply
// (forward it); s.mu is held.
func (s *Simulator) decideProxy(service, action, key, orderID string, f Faults, now time.Time) verdict {
	id := service + "/" + action + "/" + key
	s.calls[id]++
	n := s.calls[id]
	s.stats.Calls++
	if f.throttles(now) {
		s.stats.Throttled++
		return throttled
	}
	for _, win := range f.Outages {
		if !now.Before(win.From) && now.Before(win.To) {
			s.stats.Transient++
			return transient
		}
	}
	if n <= f.StallFirst || slices.Contains(f.StallOrders, orderID) ||
		(n == 1 && f.StallRate > 0 && s.keyShare("stall", id) < f.StallRate) {
		s.stats.Stalled++
		return stall
	}
	if f.TransientRate > 0 && s.rng.Float64() < f.TransientRate {
		s.stats.Transient++
		return transient
	}
	if slices.Contains(f.PermanentOrders, orderID) || (f.PermanentRate > 0 && s.keyShare("perm", id) < f.PermanentRate) {
		s.stats.Permanent++
		return permanent
	}
	s.stats.Forwarded++
	return apply
}
