package supervisor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// backlog says which queue explains a ready record's wait, or "" if none
// does. The message that starts it may wait in the scheduler queue (a
// re-send), its agent's request queue, or the response queue of the agent
// whose outcome made it ready (the reply the Scheduler starts it from);
// any of them holding BacklogDepth visible messages is a backlog. Below
// that, a consumer takes the message within a poll, so a record still
// unclaimed past its pickup deadline has likely lost it. A depth it cannot
// read counts as no backlog: a re-sent message costs only a refused claim.
//
// Delayed messages explain the wait only on the request queue of an agent
// whose flow control holds its calls now (paused, or slowed by its
// service's Retry-After): its Agent sends such a request again delayed and
// writes nothing, so the record's own request is likely among them. Any
// other delayed message is another order's retry after its back-off, or a
// wait for a key's slot or a rate turn (those give their attempt back, and
// the record's pickup clock starts when their wait ends): it never holds a
// lost message's re-send back.
//
// Such a hold ends by itself, so it explains a wait only until it may have
// ended (ends): a paused Agent's requests look at the pause again every
// flow.PausedWait, a slowed one's when the slow-down ends. The Supervisor
// looks again then (and a pickup later), not at its growing interval: a
// lost request's re-send never waits a quarter of an hour behind a pause
// that ended minutes ago.
//
// A claimed record needs no such look: its Agent records the outcome before
// replying, so no outcome of an attempt waits in a queue unrecorded, and an
// attempt past its CompleteBy is judged then.
func (s *Supervisor) backlog(ctx context.Context, d *depths, st statestore.Step, queues ...string) (why string, ends time.Duration) {
	for _, u := range queues {
		if u == "" {
			continue
		}
		n, err := d.depth(ctx, u)
		switch {
		case err != nil:
		case n.Visible >= s.cfg.BacklogDepth:
			return fmt.Sprintf("%s holds %d messages", queueName(u), n.Visible), 0
		case n.Delayed > 0 && st.Kind == workflow.KindAgent && u == s.cfg.AgentQueues[st.Agent].Requests:
			if h := d.holds(ctx, s.d.Flow, st.Agent, s.Now()); h.why != "" {
				return fmt.Sprintf("%s holds %d delayed messages: %s", queueName(u), n.Delayed, h.why), h.ends
			}
		}
	}
	return "", 0
}

// startQueues are the queues a ready record's start may wait in: its
// agent's request queue (a wait's or a timer's: the scheduler queue), and
// the response queue carrying the outcome that made it ready.
func (s *Supervisor) startQueues(st statestore.Step) []string {
	if st.State != workflow.Pending {
		return nil
	}
	queues := []string{s.start.QueueOf(st)} // where its start (a re-sent one too) goes
	if st.ReadiedBy != "" {
		queues = append(queues, s.cfg.AgentQueues[st.ReadiedBy].Responses)
	}
	return queues
}

func queueName(url string) string { return url[strings.LastIndex(url, "/")+1:] }

// depths reads each queue's depth, and each agent's flow control, once per
// sweep, however many records and shards ask for it at once.
type depths struct {
	queues  Queues
	depths  once[queue.Depth] // by queue URL
	holdsOf once[hold]        // by agent
}

// hold is why an agent holds its calls now ("": it does not), and how soon
// that may end: its requests look at a pause again within flow.PausedWait;
// a slow-down ends at its time (its requests come back within a second of
// jitter after it).
type hold struct {
	why  string
	ends time.Duration
}

// once is a value read at most once per key, however many ask at once.
type once[T any] struct {
	mu    sync.Mutex
	reads map[string]*read[T]
}

type read[T any] struct {
	once sync.Once
	v    T
	err  error
}

// get is key's value, read by f on first use.
func (o *once[T]) get(key string, f func() (T, error)) (T, error) {
	o.mu.Lock()
	if o.reads == nil {
		o.reads = map[string]*read[T]{}
	}
	r := o.reads[key]
	if r == nil {
		r = &read[T]{}
		o.reads[key] = r
	}
	o.mu.Unlock()
	r.once.Do(func() { r.v, r.err = f() })
	return r.v, r.err
}

// holds says why agent holds its calls now (none if it does not, or its
// control cannot be read: a re-send costs only a refused claim), read once
// a sweep.
func (d *depths) holds(ctx context.Context, f FlowControl, agent string, now time.Time) hold {
	if f == nil {
		return hold{}
	}
	h, _ := d.holdsOf.get(agent, func() (hold, error) {
		c, err := f.Control(ctx, agent)
		switch {
		case err != nil:
			return hold{}, err
		case c.Paused:
			return hold{"agent " + agent + " is paused", flow.PausedWait}, nil
		case c.SlowUntil.After(now):
			return hold{"agent " + agent + "'s service slowed it until " + c.SlowUntil.UTC().Format(time.RFC3339),
				c.SlowUntil.Sub(now) + time.Second}, nil
		}
		return hold{}, nil
	})
	return h
}

func (d *depths) depth(ctx context.Context, url string) (queue.Depth, error) {
	return d.depths.get(url, func() (queue.Depth, error) { return d.queues.Depth(ctx, url) })
}
