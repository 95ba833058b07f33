package console

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/operator"
)

// agentRow is one agent's flow control, as its page shows it.
type agentRow struct {
	operator.AgentFlow
	Slowed bool // its service asked for no calls before SlowUntil, still ahead
	Queued bool // calls queue for its rate limit's turns, booked up to BookedUntil
	// KeyRows are its keys in use (AgentFlow.Keys), the busiest first.
	KeyRows []keyRow
}

// keyRow is a key in use of an agent, as its table shows it.
type keyRow struct {
	keyline.KeyInUse
	// OldestWait is how long the first in its line has waited ("": no one
	// waits).
	OldestWait string
}

// agents serves the agents page: whether each agent is paused, slowed down by
// its service (Retry-After) or queueing for its rate limit, with a button to
// pause or resume it; and a table per agent of its keys in use (perKey):
// each key's calls in flight and its line, each call's order linked.
func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var rows []agentRow
	for _, a := range slices.Sorted(slices.Values(s.op.Topology.Agents)) {
		f, err := s.op.AgentFlow(r.Context(), a)
		if err != nil {
			s.failErr(w, r, "read agent "+a+"'s flow control", err)
			return
		}
		rows = append(rows, agentRow{AgentFlow: f, Slowed: f.SlowUntil.After(now), Queued: f.BookedUntil.After(now),
			KeyRows: keyRows(f.Keys, now)})
	}
	s.render(w, r, http.StatusOK, "agents", view{Title: "Agents", Nav: "agents", Data: rows})
}

// keyRows are an agent's keys in use as its table shows them at now.
func keyRows(keys []keyline.KeyInUse, now time.Time) []keyRow {
	var out []keyRow
	for _, k := range keys {
		row := keyRow{KeyInUse: k}
		if len(k.Waiters) > 0 {
			row.OldestWait = operator.Duration(max(now.Sub(k.Waiters[0].Since), 0).Round(time.Second)).String()
		}
		out = append(out, row)
	}
	return out
}

// actOnAgent pauses or resumes an agent (the same as sasctl agent pause and
// resume).
func (s *Server) actOnAgent(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	var (
		f   operator.AgentFlow
		err error
	)
	switch action {
	case "pause":
		f, err = s.op.PauseAgent(r.Context(), name, s.cfg.Who)
	case "resume":
		f, err = s.op.ResumeAgent(r.Context(), name)
	default:
		s.fail(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("An agent has no action %q (pause, resume).", action))
		return
	}
	if err != nil {
		s.failErr(w, r, action+" agent "+name, err)
		return
	}
	msg := fmt.Sprintf("Agent %s paused: its calls wait (none fails) until it is resumed.", name)
	switch {
	case action == "pause" && !f.Changed:
		msg = fmt.Sprintf("Agent %s was paused already (by %s).", name, f.PausedBy)
	case action == "resume" && !f.Changed:
		msg = fmt.Sprintf("Agent %s was not paused.", name)
	case action == "resume":
		msg = fmt.Sprintf("Agent %s resumed: its waiting calls go on within 30 s.", name)
	}
	s.redirect(w, r, "/agents", msg)
}
