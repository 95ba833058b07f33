package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/keyline"
)

// SlotStore lets a slot of an agent's calls in flight go, or passes it, and
// says to whom it was handed (keyline.Store does).
type SlotStore interface {
	Release(ctx context.Context, agent, key, holder string, now time.Time) ([]keyline.Waiter, error)
	Pass(ctx context.Context, agent, key, holder, waiterID string, until, now time.Time) ([]keyline.Waiter, error)
}

// Slots lets go the slots of an agent's calls in flight that an attempt
// ended elsewhere than in its Agent held (an async call's callback, a
// cancel that gave an accepted call back), and hands each slot on to the
// call waiting in its key's line that it went to (keyline.HandOff: its
// request, straight to its Agent).
type Slots struct {
	Store       SlotStore
	AgentQueues map[string]string // agent name → its request queue URL
	Send        Sender
}

// LetGo lets holder's slot of agent's key go, and hands it on.
func (s Slots) LetGo(ctx context.Context, agent, key, holder string, now time.Time) error {
	if s.Store == nil {
		return nil
	}
	handed, err := s.Store.Release(ctx, agent, key, holder, now)
	if err != nil {
		return fmt.Errorf("let go a slot of agent %s's key %q: %w", agent, key, err)
	}
	return s.handOff().Hand(ctx, agent, key, handed)
}

// Pass hands sl's slot to the call sl.To, and hands on the slots freed on
// the way.
func (s Slots) Pass(ctx context.Context, sl keyline.Slot, now time.Time) error {
	if s.Store == nil {
		return nil
	}
	handed, err := s.Store.Pass(ctx, sl.Agent, sl.Key, sl.Holder, sl.To, sl.Until, now)
	if err != nil {
		return err
	}
	return s.handOff().Hand(ctx, sl.Agent, sl.Key, handed)
}

func (s Slots) handOff() keyline.HandOff { return keyline.HandOff{Send: s.Send, Queues: s.AgentQueues} }
