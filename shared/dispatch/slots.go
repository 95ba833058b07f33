package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/flow"
)

// SlotStore lets a slot of an agent's calls in flight go (flow.Store.Let), or passes it (Pass),
// and says whom it was handed to.
type SlotStore interface {
	Let(ctx context.Context, agent, key, holder string, now time.Time) ([]flow.Waiter, error)
	Pass(ctx context.Context, agent, key, holder, waiterID string, until, now time.Time) ([]flow.Waiter, error)
}

// Slots lets go the slots of an agent's calls in flight that an attempt
// ended elsewhere than in its Agent held (an async call's callback, a
// cancel that gave an accepted call back), and sends straight to its
// Agent the request of each call waiting in the key's line that a slot was
// handed to.
type Slots struct {
	Store       SlotStore
	AgentQueues map[string]string // agent name → its request queue URL
	Send        Sender
}

// LetGo lets holder's slot of agent's key go, and hands it on. A hand-off
// whose send is lost frees its reservation after flow.ReserveFor.
func (s Slots) LetGo(ctx context.Context, agent, key, holder string, now time.Time) error {
	if s.Store == nil {
		return nil
	}
	handed, err := s.Store.Let(ctx, agent, key, holder, now)
	if err != nil {
		return fmt.Errorf("let go a slot of agent %s's key %q: %w", agent, key, err)
	}
	return s.send(ctx, agent, key, handed)
}

// Pass hands sl's slot to the call sl.To (flow.Store.Pass), and sends the
// requests of the waiters handed a slot on the way.
func (s Slots) Pass(ctx context.Context, sl flow.Slot, now time.Time) error {
	if s.Store == nil {
		return nil
	}
	handed, err := s.Store.Pass(ctx, sl.Agent, sl.Key, sl.Holder, sl.To, sl.Until, now)
	if err != nil {
		return err
	}
	return s.send(ctx, sl.Agent, sl.Key, handed)
}

// send sends the requests of the waiters handed a slot of agent's key.
func (s Slots) send(ctx context.Context, agent, key string, handed []flow.Waiter) error {
	var errs []error
	for _, w := range handed {
		url := s.AgentQueues[agent]
		if url == "" {
			errs = append(errs, fmt.Errorf("hand a slot of agent %s on: no request queue", agent))
			continue
		}
		if err := s.Send.SendJSON(ctx, url, json.RawMessage(w.Request), 0); err != nil {
			errs = append(errs, fmt.Errorf("hand a slot of agent %s's key %q on to %s: %w", agent, key, w.ID, err))
		}
	}
	return errors.Join(errs...)
}
