package harness

import (
	"fmt"
	"sync"
	"time"
)

// Handles keep the handle of each order an engine started, for an engine
// whose client starts an order and later waits on what the start returned.
type Handles[H any] struct {
	mu   sync.Mutex
	of   map[string]H
	sent int // orders started so far: the next one's index, for its body
}

// Start starts each order of ids with start (given its id and its body),
// 32 at a time, and keeps the handles.
func (h *Handles[H]) Start(ids []string, start func(id, body string) (H, error)) error {
	h.mu.Lock()
	first := h.sent
	h.sent += len(ids)
	if h.of == nil {
		h.of = map[string]H{}
	}
	h.mu.Unlock()
	return Each(ids, 32, func(i int, id string) error {
		handle, err := start(id, OrderBody(id, first+i))
		if err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		h.mu.Lock()
		h.of[id] = handle
		h.mu.Unlock()
		return nil
	})
}

// Wait waits for each order of ids with wait on its handle, all at once,
// and notes when each returned.
func (h *Handles[H]) Wait(ids []string, wait func(H) error) (map[string]time.Time, error) {
	return Ends(ids, func(id string) error {
		h.mu.Lock()
		handle := h.of[id]
		h.mu.Unlock()
		return wait(handle)
	})
}
