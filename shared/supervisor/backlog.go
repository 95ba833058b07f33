package supervisor

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// backlog says which queue explains a ready record's wait, or "" if none
// does. The message that starts it may wait in the scheduler queue (a
// re-send), its agent's request queue, or the response queue of the agent
// whose outcome made it ready (the reply the Scheduler starts it from);
// any of them holding BacklogDepth visible messages, or any delayed one, is
// a backlog. Below
// that, a consumer takes the message within a poll, so a record still
// unclaimed past its pickup deadline has likely lost it. A depth it cannot
// read counts as no backlog: a re-sent message costs only a refused claim.
//
// A claimed record needs no such look: its Agent records the outcome before
// replying, so no outcome of an attempt waits in a queue unrecorded, and an
// attempt past its CompleteBy is judged then.
func (s *Supervisor) backlog(ctx context.Context, d *depths, queues ...string) string {
	for _, u := range queues {
		if u == "" {
			continue
		}
		n, err := d.depth(ctx, u)
		switch {
		case err != nil:
		case n.Visible >= s.cfg.BacklogDepth:
			return fmt.Sprintf("%s holds %d messages", queueName(u), n.Visible)
		case n.Delayed > 0:
			// Its agent's flow control (a rate limit, a back-off, a pause)
			// holds calls: the record's request is likely among them.
			return fmt.Sprintf("%s holds %d messages its agent's flow control delayed", queueName(u), n.Delayed)
		}
	}
	return ""
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

// depths reads each queue's depth once per sweep, however many records and
// shards ask for it at once.
type depths struct {
	queues Queues
	mu     sync.Mutex
	reads  map[string]*depthRead
}

type depthRead struct {
	once sync.Once
	n    queue.Depth
	err  error
}

func (d *depths) depth(ctx context.Context, url string) (queue.Depth, error) {
	d.mu.Lock()
	if d.reads == nil {
		d.reads = map[string]*depthRead{}
	}
	r := d.reads[url]
	if r == nil {
		r = &depthRead{}
		d.reads[url] = r
	}
	d.mu.Unlock()
	r.once.Do(func() { r.n, r.err = d.queues.Depth(ctx, url) })
	return r.n, r.err
}
