package operator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/keyline"
)

// AgentFlow is an agent's flow control as an operator sees it.
type AgentFlow struct {
	Agent     string    `json:"agent"`
	Paused    bool      `json:"paused"`
	PausedBy  string    `json:"pausedBy,omitempty"`
	PausedAt  time.Time `json:"pausedAt,omitzero"`
	SlowUntil time.Time `json:"slowUntil,omitzero"` // its service asked for no calls before then
	// BookedUntil: its rate limit's turns are taken up to then (calls
	// queue for it, if it is past now).
	BookedUntil time.Time `json:"bookedUntil,omitzero"`
	// RateLimit is its rate limit as its calls last took it (50/s; "":
	// none taken).
	RateLimit string `json:"rateLimit,omitempty"`
	// KeysInUse is how many keys of its perKey have calls in flight, a
	// slot reserved or calls waiting; KeyWaiters how many calls wait in
	// their lines, the longest for LongestKeyWait.
	KeysInUse      int      `json:"keysInUse,omitempty"`
	KeyWaiters     int      `json:"keyWaiters,omitempty"`
	LongestKeyWait Duration `json:"longestKeyWait,omitzero"`
	// Keys are its keys in use, the busiest first, at most MaxKeysShown.
	Keys []keyline.KeyInUse `json:"keys,omitempty"`
	// Changed, for pause and resume: whether this call changed it.
	Changed bool `json:"changed"`
}

// PauseAgent pauses the agent's calls to its service (a provider's planned
// maintenance): its requests wait, none fails, until ResumeAgent.
func (o *Operator) PauseAgent(ctx context.Context, agent, by string) (AgentFlow, error) {
	if err := o.knownAgent(agent); err != nil {
		return AgentFlow{}, err
	}
	changed, err := o.Flow.Pause(ctx, agent, by, o.Now())
	if err != nil {
		return AgentFlow{}, err
	}
	f, err := o.AgentFlow(ctx, agent)
	f.Changed = changed
	return f, err
}

// ResumeAgent lets a paused agent's calls go on.
func (o *Operator) ResumeAgent(ctx context.Context, agent string) (AgentFlow, error) {
	if err := o.knownAgent(agent); err != nil {
		return AgentFlow{}, err
	}
	changed, err := o.Flow.Resume(ctx, agent)
	if err != nil {
		return AgentFlow{}, err
	}
	f, err := o.AgentFlow(ctx, agent)
	f.Changed = changed
	return f, err
}

// AgentFlow reads the agent's flow control, and its keys in use (its
// calls in flight per key and their lines).
func (o *Operator) AgentFlow(ctx context.Context, agent string) (AgentFlow, error) {
	c, err := o.Flow.Control(ctx, agent)
	if err != nil {
		return AgentFlow{}, err
	}
	booked, limit, err := o.Flow.Booked(ctx, agent)
	if err != nil {
		return AgentFlow{}, err
	}
	keys, err := o.Lines.Keys(ctx, agent, MaxKeysShown, o.Now())
	if err != nil {
		return AgentFlow{}, err
	}
	f := AgentFlow{Agent: agent, Paused: c.Paused, PausedBy: c.PausedBy, PausedAt: utc(c.PausedAt), SlowUntil: utc(c.SlowUntil),
		BookedUntil: utc(booked), RateLimit: limit}
	f.keysInUse(keys, o.Now())
	return f, nil
}

func (o *Operator) knownAgent(agent string) error {
	if !slices.Contains(o.Topology.Agents, agent) {
		return fmt.Errorf("no agent %q in this deployment (its agents: %v)", agent, o.Topology.Agents)
	}
	return nil
}
