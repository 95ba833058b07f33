package supervisor

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/statestore"
)

// The defaults of Config's limits, used where a field is zero.
const (
	// BacklogDepthDefault is how many messages waiting on a queue make it
	// backlogged: a batch's worth.
	BacklogDepthDefault = 10
	// ParallelDefault is how many records (and orders moved on) are handled
	// at once, across every shard: each is a conditional write and perhaps a
	// send, so a sweep makes about this many requests at a time.
	ParallelDefault = 16
	// ShardParallelismDefault is how many shards of the deadline index are
	// swept at once: the deployment's 4 shards by default, all of them.
	ShardParallelismDefault = 4
	// PageSizeDefault is how many orders one page of a shard reads: a Query
	// of the index, then one BatchGetItem (at most 100 keys).
	PageSizeDefault = statestore.MaxDuePage
	// TimeBudgetDefault is how long a sweep goes on reading further pages:
	// two thirds of the function's 30 s timeout, which a sweep every minute
	// with reserved concurrency 1 never overlaps. Every shard reads its
	// first page however short the budget, so none starves.
	TimeBudgetDefault = 20 * time.Second
	// CensusEveryDefault is how often the census of versions in flight
	// begins a pass (Census): hourly.
	CensusEveryDefault = time.Hour
	// CensusBudgetDefault is the census's share of a sweep's time: it reads
	// pages of the orders in flight beside the sweep for this long at most
	// (one page at least), then saves its cursor for the next run.
	CensusBudgetDefault = 2 * time.Second
)

// sweepReserve is kept back from the invocation's deadline: the sweep reads
// no page after it, so the writes of the pages read can finish.
const sweepReserve = 5 * time.Second

// Config is what the Supervisor needs to know of its deployment, and the
// limits of its sweep (zero: the XDefault constants).
type Config struct {
	SchedulerQueueURL string
	// AgentQueues, by agent: a ready step's start may wait in its agent's
	// request queue, or the response queue of the agent whose outcome made
	// it ready (a wait's or a timer's, in the scheduler queue).
	AgentQueues   map[string]AgentQueues
	PickupTimeout time.Duration // the unit of the intervals between looks at a waiting step
	// BacklogDepth is how many visible messages make a queue backlogged for
	// a ready step's start (default BacklogDepthDefault).
	BacklogDepth int
	// Parallel bounds the records handled at once, across every shard
	// (default ParallelDefault).
	Parallel int
	// ShardParallelism bounds the shards swept at once (default
	// ShardParallelismDefault).
	ShardParallelism int
	// PageSize is the orders a shard reads per page, 1 to 100 (default
	// PageSizeDefault).
	PageSize int
	// TimeBudget is how long a sweep starts new pages (default
	// TimeBudgetDefault); it ends sooner when every shard has none due, or
	// sweepReserve before the invocation's deadline.
	TimeBudget time.Duration
	// CensusEvery is how often a census of versions in flight begins
	// (default CensusEveryDefault); CensusBudget its share of each sweep's
	// time, at most TimeBudget (default CensusBudgetDefault).
	CensusEvery, CensusBudget time.Duration
}

// WithDefaults returns c with every zero limit at its default.
func (c Config) WithDefaults() Config {
	if c.BacklogDepth == 0 {
		c.BacklogDepth = BacklogDepthDefault
	}
	if c.Parallel == 0 {
		c.Parallel = ParallelDefault
	}
	if c.ShardParallelism == 0 {
		c.ShardParallelism = ShardParallelismDefault
	}
	if c.PageSize == 0 {
		c.PageSize = PageSizeDefault
	}
	if c.TimeBudget == 0 {
		c.TimeBudget = TimeBudgetDefault
	}
	if c.CensusEvery == 0 {
		c.CensusEvery = CensusEveryDefault
	}
	if c.CensusBudget == 0 {
		c.CensusBudget = min(CensusBudgetDefault, c.TimeBudget)
	}
	return c
}

// Validate says which limit of c (its defaults applied) cannot be used.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.BacklogDepth < 1:
		return fmt.Errorf("supervisor: backlog depth must be at least 1 message, not %d", c.BacklogDepth)
	case c.Parallel < 1:
		return fmt.Errorf("supervisor: parallel must be at least 1, not %d", c.Parallel)
	case c.ShardParallelism < 1:
		return fmt.Errorf("supervisor: shard parallelism must be at least 1, not %d", c.ShardParallelism)
	case c.PageSize < 1 || c.PageSize > statestore.MaxDuePage:
		return fmt.Errorf("supervisor: page size must be 1 to %d orders, not %d", statestore.MaxDuePage, c.PageSize)
	case c.TimeBudget < 0 || c.TimeBudget > 15*time.Minute:
		return fmt.Errorf("supervisor: time budget must be positive and at most 15m (Lambda's longest timeout), not %s", c.TimeBudget)
	case c.CensusEvery < 0:
		return fmt.Errorf("supervisor: census period must be positive, not %s", c.CensusEvery)
	case c.CensusBudget < 0 || c.CensusBudget > c.TimeBudget:
		return fmt.Errorf("supervisor: census budget must be positive and at most the time budget %s, not %s", c.TimeBudget, c.CensusBudget)
	}
	return nil
}

// mustValidate panics with Validate's error: a configuration that cannot
// sweep is a programming or deployment error, found at the cold start.
func (c Config) mustValidate() Config {
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c.WithDefaults()
}
