// Package remotesim simulates the remote services the Agents call: an HTTP
// server on loopback with knobs for latency, transient errors, outage windows,
// stalls and permanent failures. It applies each idempotency key's effect
// once and records every effect in a ledger, so tests can prove that every
// step's effect happened exactly once.
package remotesim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Faults are the knobs of one service.
type Faults struct {
	Latency         time.Duration `json:"latency"`         // added to every call
	TransientRate   float64       `json:"transientRate"`   // share of calls answered 503
	Outages         []Window      `json:"outages"`         // calls inside a window get 503
	PermanentRate   float64       `json:"permanentRate"`   // share of keys refused for good (422)
	PermanentOrders []string      `json:"permanentOrders"` // orders refused for good
	StallFirst      int           `json:"stallFirst"`      // the first N calls of each key hang until the caller gives up
	StallRate       float64       `json:"stallRate"`       // share of keys whose first call hangs
	StallOrders     []string      `json:"stallOrders"`     // orders whose every call hangs
	LostReplyOrders []string      `json:"lostReplyOrders"` // orders whose calls take effect, then hang (the reply is lost)
	SlowRate        float64       `json:"slowRate"`        // share of calls that take SlowLatency more
	SlowLatency     time.Duration `json:"slowLatency"`
	// The answers: ResultBytes pads each answer to about that many bytes
	// of JSON (0: a small one); NoResult answers 204 with no body.
	ResultBytes int  `json:"resultBytes,omitempty"`
	NoResult    bool `json:"noResult,omitempty"`
	// OrderResultBytes pads the answers to the orders it names to their
	// own size instead of ResultBytes (an order at the limits, among
	// others).
	OrderResultBytes map[string]int `json:"orderResultBytes,omitempty"`
	// Hostile is the share of the keys whose answers are made of what
	// encoders change (shared/devkit/hostile): JSON whose strings hold raw
	// <, >, &, U+2028 and U+FFFD and escaped control characters; NotJSON
	// the share answered with XML around raw control bytes and invalid
	// UTF-8 instead (a call that is not async: a callback's data is JSON).
	// Each such answer is exactly its size as the product keeps it: the
	// JSON as it is, the text as encoding/json quotes it
	// (hostile.MarshalLen); its size is its order's (OrderResultBytes), or
	// one of ResultSizes by its key's hash, or ResultBytes.
	Hostile     float64 `json:"hostile,omitempty"`
	NotJSON     float64 `json:"notJson,omitempty"`
	ResultSizes []int   `json:"resultSizes,omitempty"`
	// CallbackDelay is how long an async call (one carrying an
	// X-Callback-Token header, answered 202) takes to call back with its
	// answer; a LostReplyOrders order's never does.
	CallbackDelay time.Duration `json:"callbackDelay,omitempty"`
	// CallbackFirst: an async call's service calls back first, then
	// answers 202 half a second later (its callback may be recorded before
	// its Agent notes the acceptance).
	CallbackFirst bool `json:"callbackFirst,omitempty"`
	// Throttled: a call inside a window is answered 429 Too Many Requests
	// with a Retry-After header of RetryAfter (whole seconds, at least 1),
	// before any other fault and whether its key was applied or not (a
	// gateway's rate limiter in front of the service); nothing is applied.
	Throttled  []Window      `json:"throttled,omitempty"`
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
}

// retryAfter is the Retry-After header f's 429 carries: whole seconds, at
// least one.
func (f Faults) retryAfter() string {
	return strconv.Itoa(max(int((f.RetryAfter+time.Second-1)/time.Second), 1))
}

// throttles reports whether a call at now falls in one of f's Throttled
// windows.
func (f Faults) throttles(now time.Time) bool {
	for _, win := range f.Throttled {
		if !now.Before(win.From) && now.Before(win.To) {
			return true
		}
	}
	return false
}

// Window is a span of wall-clock time.
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Effect is one applied effect in the ledger.
type Effect struct {
	Service   string    `json:"service"`
	Action    string    `json:"action"`
	Key       string    `json:"key"`
	OrderID   string    `json:"orderId"`
	AppliedAt time.Time `json:"appliedAt"`
	Calls     int       `json:"calls"` // calls made with this key, replays included
	// Input is what the first applied call carried.
	Input json.RawMessage `json:"input,omitempty"`
}

// Callback is an async call's answer, for the pipeline: an event carrying
// the call's token.
type Callback struct {
	OrderID string
	Token   string
	Answer  json.RawMessage
}

// Stats count the calls by answer.
type Stats struct {
	Calls, Applied, Replayed, Transient, Permanent, Stalled, Slow int
	Throttled                                                     int // calls answered 429 with Retry-After
	Unauthorized                                                  int // calls refused (401) for their credentials
	Forwarded                                                     int // calls the fault proxy passed to their service's own endpoint
	NotJSON                                                       int // answers not JSON (Faults.NotJSON), replays included
}

// Simulator is the remote services' state. Safe for concurrent use.
type Simulator struct {
	mu     sync.Mutex
	seed   uint64
	rng    *rand.Rand
	faults map[string]Faults // by service; "" applies to services with none of their own
	ledger map[string]*Effect
	calls  map[string]int // by service/key
	stats  Stats
	guards map[string]Guard // by service
	// callback takes async calls' answers (OnCallback); nil: none is sent.
	callback func(Callback)
	proxies  map[string]*url.URL // the services behind the fault proxy, by name: their own endpoints
	logged   map[string][]Call   // the calls of the services LogCalls named, by service
}

// Call is one call a service received, as LogCalls keeps it.
type Call struct {
	Service, Action, Key string
	At                   time.Time // when it arrived, before the service's latency
	Status               int       // what it was answered (0: it hung until the caller gave up)
}

// LogCalls keeps every call the services receive from now on (Calls
// returns them): when each arrived and how it was answered.
func (s *Simulator) LogCalls(services ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logged == nil {
		s.logged = map[string][]Call{}
	}
	for _, svc := range services {
		if _, ok := s.logged[svc]; !ok {
			s.logged[svc] = []Call{}
		}
	}
}

// Calls are the calls service received since LogCalls named it, in the
// order they were answered (nil if it was not named).
func (s *Simulator) Calls(service string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logged[service])
}

// logCall keeps a call of a service LogCalls named; s.mu is held.
func (s *Simulator) logCall(c Call) {
	if l, ok := s.logged[c.Service]; ok {
		s.logged[c.Service] = append(l, c)
	}
}

// OnCallback sets where async calls' answers go (the local stack sends each
// to the orders queue as an event).
func (s *Simulator) OnCallback(f func(Callback)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.callback = f
}

// New returns a simulator whose random choices follow seed.
func New(seed uint64) *Simulator {
	return &Simulator{seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		faults: map[string]Faults{}, ledger: map[string]*Effect{}, calls: map[string]int{}}
}

// SetFaults sets the knobs of a service, or of one action of a service
// ("payment/refund-payment"), or ("") of everything without knobs of its own.
func (s *Simulator) SetFaults(service string, f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[service] = f
}

func (s *Simulator) faultsOf(service, action string) Faults {
	if f, ok := s.faults[service+"/"+action]; ok {
		return f
	}
	if f, ok := s.faults[service]; ok {
		return f
	}
	return s.faults[""]
}

// Ledger returns the applied effects, oldest first.
func (s *Simulator) Ledger() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Effect, 0, len(s.ledger))
	for _, e := range s.ledger {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Effect) int { return a.AppliedAt.Compare(b.AppliedAt) })
	return out
}

// Stats returns the call counts so far.
func (s *Simulator) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Server is a running simulator.
type Server struct {
	URL  string
	srv  *http.Server
	done chan struct{}
}

// Close stops the server, ending calls in flight.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Start serves the simulator on addr (use "127.0.0.1:0" for a free port).
func (s *Simulator) Start(addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remote simulator listen: %w", err)
	}
	srv := &Server{URL: "http://" + l.Addr().String(), srv: &http.Server{Handler: s.Handler(),
		ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	go func() { _ = srv.srv.Serve(l); close(srv.done) }()
	return srv, nil
}

// Handler is the simulator's HTTP API:
//
//	POST /v1/services/{service}/{action} apply an effect (Idempotency-Key header)
//	POST /v1/proxy/{service}/{action}    the service's faults, then its own endpoint (Proxy)
//	PUT  /v1/services/{service}/faults  set the service's knobs (JSON Faults)
//	GET  /v1/ledger                     the applied effects (JSON)
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/services/{service}/{action}", s.apply)
	mux.HandleFunc("POST /v1/proxy/{service}/{action}", s.proxy)
	mux.HandleFunc("PUT /v1/services/{service}/faults", func(w http.ResponseWriter, r *http.Request) {
		var f Faults
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, "bad faults: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.SetFaults(r.PathValue("service"), f)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/ledger", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Ledger())
	})
	return mux
}

// keyShare maps a key to [0,1) deterministically for the seed.
func (s *Simulator) keyShare(salt, key string) float64 { return Mix(s.seed, salt, key) }

// Mix maps a seed and some strings to [0,1), uniformly and deterministically:
// FNV-1a through SplitMix64's finalizer (FNV alone hardly moves its high bits
// when inputs differ only in their last bytes).
func Mix(seed uint64, parts ...string) float64 {
	var digits [20]byte
	x := fnv64a(fnvOffset, strconv.AppendUint(digits[:0], seed, 10))
	for _, p := range parts {
		x = fnv64a(fnv64a(x, "/"), p)
	}
	return finish(x)
}

// finish is SplitMix64's finalizer of x, as a float in [0,1).
func finish(x uint64) float64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / float64(1<<53)
}

// fnvOffset is FNV-1a's 64-bit offset basis.
const fnvOffset = 14695981039346656037

// fnv64a is FNV-1a (hash/fnv's New64a) over b from h, allocating nothing:
// Mix runs once for each line of a 16 MB answer.
func fnv64a[T string | []byte](h uint64, b T) uint64 {
	for i := range len(b) {
		h ^= uint64(b[i])
		h *= 1099511628211
	}
	return h
}
