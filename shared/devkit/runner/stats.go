package runner

import (
	"maps"
	"sync"
	"time"
)

// FunctionStats count one function's invocations.
type FunctionStats struct {
	Invocations    int
	Errors         int // invocations that failed as a whole
	Messages       int
	FailedItems    int // records reported in BatchItemFailures
	HandlerTime    time.Duration
	FaultsInjected map[string]int
}

// Stats count invocations by function, and messages delivered by queue;
// safe for concurrent use.
type Stats struct {
	mu      sync.Mutex
	by      map[string]*FunctionStats
	byQueue map[string]int
}

// NewStats returns empty stats.
func NewStats() *Stats { return &Stats{by: map[string]*FunctionStats{}, byQueue: map[string]int{}} }

func (s *Stats) delivered(queue string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byQueue[queue] += n
}

// Deliveries returns the messages delivered to a function from each queue,
// by queue name, a second delivery of one message (SQS's or a fault's)
// included.
func (s *Stats) Deliveries() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.byQueue)
}

func (s *Stats) get(fn string) *FunctionStats {
	f := s.by[fn]
	if f == nil {
		f = &FunctionStats{FaultsInjected: map[string]int{}}
		s.by[fn] = f
	}
	return f
}

func (s *Stats) invoked(fn string, d time.Duration, msgs int, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.get(fn)
	f.Invocations++
	f.Messages += msgs
	f.HandlerTime += d
	if failed {
		f.Errors++
	}
}

func (s *Stats) failedItems(fn string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.get(fn).FailedItems += n
}

func (s *Stats) faulted(fn, kind string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.get(fn).FaultsInjected[kind] += n
}

// Snapshot returns a copy of the counts by function.
func (s *Stats) Snapshot() map[string]FunctionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]FunctionStats, len(s.by))
	for k, v := range s.by {
		c := *v
		c.FaultsInjected = maps.Clone(v.FaultsInjected)
		out[k] = c
	}
	return out
}
