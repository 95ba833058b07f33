// Package deployment composes the handlers from one deployment's
// configuration: the Lambda mains build it from environment variables, the
// local stack from the resources it provisioned. Queue URLs derive from the
// topology's names and one base URL, so the two cannot disagree.
package deployment

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/scheduler"
	"github.com/sas-go/sas/shared/searchkey"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/submission"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/tracing"
	"github.com/sas-go/sas/shared/workflow"
)

// Config is one deployment: its settings, and the workflows they load.
type Config struct {
	Settings
	// Workflows are the workflows loaded (WorkflowFiles, or the example
	// order workflow), with the settings' overrides, their ${NAME}s as
	// written (an Agent fills its own).
	Workflows    workflow.Set
	AgentBackoff resilience.Backoff
	Breaker      BreakerConfig
}

// BreakerConfig configures each Agent's circuit breaker.
type BreakerConfig struct {
	Threshold int
	Cooldown  time.Duration
}

// StepTimeoutMargin is the part of an agent function's timeout a step's
// cannot take: the time to claim, and to reply after CompleteBy.
const StepTimeoutMargin = 5 * time.Second

// MaxStepTimeout is the longest step timeout the topology's agent
// functions allow.
func (s Settings) MaxStepTimeout() time.Duration {
	return s.Topology.FunctionTimeout - StepTimeoutMargin
}

// QueueURL is the URL of the named queue.
func (s Settings) QueueURL(name string) string { return s.QueueURLBase + "/" + name }

// Validate checks the configuration, including the workflow definition.
func (c Config) Validate() error {
	if err := c.Settings.Validate(); err != nil {
		return err
	}
	if c.QueueURLBase == "" || c.AlertTopicARN == "" {
		return fmt.Errorf("deployment: queue URL base and alert topic ARN are required")
	}
	if err := notify.Allowed(c.AllowedReplyQueues).Validate(); err != nil {
		return fmt.Errorf("deployment: %w", err)
	}
	if c.BacklogDepth < 0 {
		return fmt.Errorf("deployment: backlog depth must not be negative, not %d", c.BacklogDepth)
	}
	if err := c.Workflows.Validate(c.Topology.Agents); err != nil {
		return err
	}
	return CheckStepTimeouts(c.Workflows, c.Topology.FunctionTimeout)
}

// CheckStepTimeouts says which step of the workflows has a timeout longer
// than an agent function of timeout fn allows, if any. A wait, a timer and
// an async step's callback are not bounded by a function.
func CheckStepTimeouts(set workflow.Set, fn time.Duration) error {
	limit := fn - StepTimeoutMargin
	for _, d := range set.Definitions() {
		for _, st := range d.Steps {
			if st.Kind() != workflow.KindAgent {
				continue
			}
			for _, a := range []*workflow.Action{&st.Action, st.Undo} {
				if a != nil && !a.Async && a.Timeout > limit {
					return fmt.Errorf("workflow %q: step %q's timeout %s is longer than its agent function allows (%s: its timeout %s less %s)",
						d.Name, a.Name, a.Timeout, limit, fn, StepTimeoutMargin)
				}
			}
		}
	}
	return nil
}

// PickupWindows is how many batching windows a pickup timeout must span: a
// ready step's start may wait in two (the Scheduler's, then its Agent's)
// before the claim, and the handlers take their time too.
const PickupWindows = 3

// CheckPickupTimeouts says which workflow's pickup timeout is too short for
// event source mappings that batch for window: its ready steps would be
// judged lost while they sit in a batching window, and the re-sends would
// make the backlog that then holds every recovery.
func CheckPickupTimeouts(set workflow.Set, window time.Duration) error {
	for _, d := range set.Definitions() {
		if min := PickupWindows * window; d.PickupTimeout < min {
			return fmt.Errorf("workflow %q: pickup timeout %s is shorter than %d batching windows of %s (%s): "+
				"a step's start may wait in two windows before its claim; raise pickupTimeout or lower batchWindowSeconds",
				d.Name, d.PickupTimeout, PickupWindows, window, min)
		}
	}
	return nil
}

// CheckDeadlines says why a workflow of set cannot run: a wait's timeout
// longer than the order's deadline, or a timer's sleep not shorter than it,
// which would fail every order first. A file is checked against its own
// deadline when it is read; this checks it against an override's.
func CheckDeadlines(set workflow.Set) error {
	for _, d := range set.Definitions() {
		for _, st := range d.Steps {
			switch {
			case st.Wait != nil && st.Wait.Timeout > d.Deadline:
				return fmt.Errorf("workflow %q: step %s waits up to %s, longer than the order deadline of %s, which would fail the order first: "+
					"raise orderDeadline", d.Name, st.Name, st.Wait.Timeout, d.Deadline)
			case st.Sleep != nil && st.Sleep.Until == "" && st.Sleep.For >= d.Deadline:
				return fmt.Errorf("workflow %q: step %s sleeps %s, not shorter than the order deadline of %s, which would fail the order first: "+
					"raise orderDeadline", d.Name, st.Name, st.Sleep.For, d.Deadline)
			}
		}
	}
	return nil
}

// Deployment builds handlers over one configuration and set of clients.
type Deployment struct {
	Config  Config
	Clients *awsclient.Clients
	Log     *slog.Logger
	Metrics io.Writer // where EMF lines go (stdout in Lambda)
	HTTP    *http.Client
	// Auth gives an HTTP agent the credentials its declaration names (nil:
	// an agent that declares some cannot be built). The agent function sets
	// it (shared/agentauth): the others do not link the clients it needs.
	Auth func(ctx context.Context, a workflow.Agent) (agent.Authorizer, error)
	// Remotes are the Agents written in Go, by agent name (custom: true).
	Remotes map[string]agent.Remote
	// Vars fill the ${NAME}s of an agent's declaration (nil: os.Getenv).
	Vars workflow.Vars
	// Endpoints, by agent name, replace its declaration's endpoint (sasctl
	// dev's fault proxy in front of a service of your own); nil: none.
	Endpoints map[string]string
	// FlushTraces flushes the spans made so far (tracing.Setup's); nil:
	// tracing is off.
	FlushTraces func(context.Context) error
}

// Traced is h, its spans flushed at the end of each invocation (tracing.Flushed),
// when tracing is on.
func Traced[In, Out any](d *Deployment, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	if d.FlushTraces == nil {
		return h
	}
	return tracing.Flushed(d.FlushTraces, h)
}

func (d *Deployment) emitter(fn string) *metrics.Emitter { return metrics.New(d.Metrics, fn) }

func (d *Deployment) notifier(m *metrics.Emitter, log *slog.Logger) *notify.Notifier {
	return notify.New(queue.NewSender(d.Clients.SQS), notify.Allowed(d.Config.AllowedReplyQueues), m, log)
}

// countingIn is the deployment's state store, each end its writes make
// counted in m (notify.EndCounter): in the metrics of the function whose
// write ended the order, once.
func (d *Deployment) countingIn(m *metrics.Emitter) *statestore.Store {
	return d.Store().WithEnds(notify.EndCounter(m))
}

// Store is the state store of the deployment; its ends are counted in no
// function's metrics (a handler's is countingIn its own).
func (d *Deployment) Store() *statestore.Store {
	t := d.Config.Topology
	return statestore.New(d.Clients.DynamoDB, t.OrdersTable(), t.StateTable(), t.DeadlineShards).
		WithRetention(d.Config.Retention())
}

// Kept is a new boundary for a handler's values (shared/kept): the
// deployment's payload bucket (none: every value inline, at most
// kept.MaxInline) and a sealer under the deployment's data key (dataKey;
// none: nothing sealed). With sealData off (the key kept), it opens what was
// sealed before, and seals under their data keys what is made of sealed
// orders; Submission seals no new order with it then. Each handler has its
// own, as each function instance does (the data keys it opened, its own):
// a local stack's KMS requests are a deployment's.
func (d *Deployment) Kept() *kept.Boundary {
	payloads := kept.Payloads(d.Clients.S3, d.Config.PayloadBucket, d.Config.PayloadInlineBytes)
	if d.Config.PayloadBucket == "" {
		payloads = nil
	}
	sealer := kept.Sealer(d.Clients.KMS, d.Config.DataKey)
	if d.Config.DataKey == "" {
		sealer = nil
	}
	return kept.New(payloads, sealer)
}

// Offload reads and writes the bodies senders offload to the deployment's
// payload bucket (the SQS Extended Client's): nil if it has none.
func (d *Deployment) Offload() *offload.Store {
	if d.Config.PayloadBucket == "" {
		return nil
	}
	return offload.New(d.Clients.S3, d.Config.PayloadBucket)
}

// Submission builds the Submission handler.
func (d *Deployment) Submission() (*submission.Handler, error) {
	t := d.Config.Topology
	m, log := d.emitter("submission"), d.Log.With("function", "submission")
	return submission.New(submission.Config{
		Workflows:          d.Config.Workflows,
		AgentQueues:        d.agentRequestQueues(),
		SchedulerQueueURL:  d.Config.QueueURL(t.SchedulerQueue().Name),
		DLQURL:             d.Config.QueueURL(t.OrdersQueue().DLQName),
		QueueURL:           d.Config.QueueURL(t.OrdersQueue().Name),
		EventsQueueURL:     d.Config.QueueURL(t.EventsQueue().Name),
		EventsDLQURL:       d.Config.QueueURL(t.EventsQueue().DLQName),
		AllowedReplyQueues: notify.Allowed(d.Config.AllowedReplyQueues),
		OpenOnly:           !d.Config.SealData,
	}, submission.Deps{Store: d.countingIn(m), Kept: d.Kept(), Offload: d.Offload(), Send: queue.NewSender(d.Clients.SQS), Notify: d.notifier(m, log), Metrics: m, Log: log,
		Slots: keyline.NewStore(d.Clients.DynamoDB, d.Config.Topology.StateTable()), Budget: kept.BudgetFor(functionMemoryMB(topology.CoordinatorMemoryMB)),
		SearchNames: d.searchNames()})
}

// Scheduler builds a Scheduler handler.
func (d *Deployment) Scheduler() (*scheduler.Handler, error) {
	m, log := d.emitter("scheduler"), d.Log.With("function", "scheduler")
	return scheduler.New(scheduler.Config{
		Workflows: d.Config.Workflows, AgentQueues: d.agentRequestQueues(),
		DLQURL: d.Config.QueueURL(d.Config.Topology.SchedulerQueue().DLQName),
	}, scheduler.Deps{Store: d.countingIn(m), Send: queue.NewSender(d.Clients.SQS),
		Alerts: alert.New(d.Clients.SNS, d.Config.AlertTopicARN, m), Notify: d.notifier(m, log), Metrics: m, Log: log,
		Budget: kept.BudgetFor(functionMemoryMB(topology.CoordinatorMemoryMB)), Kept: d.Kept()})
}

func (d *Deployment) agentRequestQueues() map[string]string {
	t := d.Config.Topology
	out := map[string]string{}
	for _, a := range t.Agents {
		out[a] = d.Config.QueueURL(t.AgentRequests(a).Name)
	}
	return out
}

// Agent builds the Agent handler of the named remote service, whose claims
// carry instanceID: an HTTP agent calls the endpoint its workflow file
// declares, with its credentials; a custom one runs the Go code in Remotes.
func (d *Deployment) Agent(ctx context.Context, name, instanceID string) (*agent.Handler, error) {
	spec, err := d.Config.Workflows.ResolveAgent(name, d.Vars)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", name, err)
	}
	if ep, ok := d.Endpoints[name]; ok && !spec.Custom {
		spec.Endpoint = ep
	}
	remote, err := d.remote(ctx, spec)
	if err != nil {
		return nil, err
	}
	t := d.Config.Topology
	fn := "agent-" + name
	b := d.Config.Breaker
	if b.Threshold <= 0 {
		b = BreakerConfig{Threshold: 5, Cooldown: 2 * time.Second}
	}
	backoff := d.Config.AgentBackoff
	if backoff.Base <= 0 {
		backoff = resilience.Backoff{Base: 50 * time.Millisecond, Max: 2 * time.Second}
	}
	k, m := d.Kept(), d.emitter(fn)
	return agent.New(agent.Config{
		Workflows: d.Config.Workflows, Name: name, InstanceID: instanceID, ResponseQueueURL: d.Config.QueueURL(t.AgentResponses(name).Name),
		RequestQueueURL: d.Config.QueueURL(t.AgentRequests(name).Name), RateLimit: spec.RateLimit, PerKey: spec.PerKey,
		DLQURL: d.Config.QueueURL(t.AgentRequests(name).DLQName), Backoff: backoff,
		CallTimeout: spec.Timeout, Margin: 100 * time.Millisecond,
	}, agent.Deps{Remote: remote, Kept: k, Budget: kept.BudgetFor(functionMemoryMB(spec.MemoryMB)),
		Breaker: &resilience.Breaker{Threshold: b.Threshold, Cooldown: b.Cooldown}, Store: d.countingIn(m),
		Gate:  &flow.Gate{Store: flow.NewStore(d.Clients.DynamoDB, t.StateTable())},
		Lines: keyline.NewStore(d.Clients.DynamoDB, t.StateTable()), Names: d.keyNames(name, spec, k),
		Send: queue.NewSender(d.Clients.SQS), Metrics: m, Log: d.Log.With("function", fn, "instance", instanceID)}), nil
}

// searchNames names the values of the orders' searchable fields in a
// deployment that seals its orders' data (nil: kept as they are).
func (d *Deployment) searchNames() searchkey.Namer {
	k := d.Kept()
	if !d.Config.SealData || !k.Seals() {
		return nil
	}
	return searchkey.NewNamer(d.Clients.DynamoDB, d.Config.Topology.StateTable(), k.Sealer())
}

// keyNames names the keys of agent's calls in flight (its perKey) in a
// deployment that seals its orders' data (sealData): nil, they are kept by
// their values.
func (d *Deployment) keyNames(agent string, spec workflow.Agent, k *kept.Boundary) *keyname.Namer {
	if !d.Config.SealData || !k.Seals() || spec.PerKey == nil {
		return nil
	}
	// Its secret sealed under the deployment's key, as the orders' data keys.
	return keyname.NewNamer(d.Clients.DynamoDB, d.Config.Topology.StateTable(), agent, k.Sealer())
}

// functionMemoryMB is the memory of the Lambda function this runs in
// (AWS_LAMBDA_FUNCTION_MEMORY_SIZE), or, outside Lambda, declared: the
// function's as the stack sizes it (an agent's, as its workflow file
// declares it; 0: an agent's default).
func functionMemoryMB(declared int) int {
	if n, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")); err == nil && n > 0 {
		return n
	}
	return cmp.Or(declared, topology.AgentMemoryMB)
}

// remote is how the agent reaches its service.
func (d *Deployment) remote(ctx context.Context, spec workflow.Agent) (agent.Remote, error) {
	if spec.Custom {
		r, ok := d.Remotes[spec.Name]
		if !ok {
			return nil, fmt.Errorf("agent %q is custom (Go code) but this program does not have it: deploy functions/%s", spec.Name, spec.Name)
		}
		return r, nil
	}
	client := d.HTTP
	if client == nil {
		client = &http.Client{}
	}
	if tracing.Enabled() { // a client span per call; its traceparent header reaches the service
		c := *client
		c.Transport = tracing.HTTPTransport(cmp.Or(c.Transport, http.DefaultTransport))
		client = &c
	}
	r := &agent.HTTPRemote{Endpoint: spec.Endpoint, Service: spec.Name, Transient: spec.Transient, Refuse: spec.Refuse, Client: client,
		Log: d.Log.With("function", "agent-"+spec.Name)}
	if spec.Auth == nil {
		return r, nil
	}
	if d.Auth == nil {
		return nil, fmt.Errorf("agent %q declares auth, but this program reads no credentials", spec.Name)
	}
	auth, err := d.Auth(ctx, spec)
	if err != nil {
		return nil, err
	}
	r.Auth = auth
	return r, nil
}

// Supervisor builds the Supervisor handler.
func (d *Deployment) Supervisor(instanceID string) *supervisor.Supervisor {
	return supervisor.New(d.SupervisorParts(instanceID))
}

// SupervisorParts are the configuration and dependencies Supervisor builds
// the handler from (a test may wrap one).
func (d *Deployment) SupervisorParts(instanceID string) (supervisor.Config, supervisor.Deps) {
	t := d.Config.Topology
	m, log := d.emitter("supervisor"), d.Log.With("function", "supervisor", "instance", instanceID)
	store, alerts := d.countingIn(m), alert.New(d.Clients.SNS, d.Config.AlertTopicARN, m)
	agents := map[string]supervisor.AgentQueues{}
	for _, a := range t.Agents {
		agents[a] = supervisor.AgentQueues{Requests: d.Config.QueueURL(t.AgentRequests(a).Name),
			Responses: d.Config.QueueURL(t.AgentResponses(a).Name)}
	}
	return supervisor.Config{
			SchedulerQueueURL: d.Config.QueueURL(t.SchedulerQueue().Name), AgentQueues: agents,
			PickupTimeout: d.Config.Workflows.Default().PickupTimeout, BacklogDepth: d.Config.BacklogDepth,
			// Every shard at once; the orders handled at once across them are bounded.
			Parallel: d.Config.SupervisorParallelism, ShardParallelism: t.DeadlineShards, CensusEvery: d.Config.CensusEvery,
		}, supervisor.Deps{Store: store, Queues: queue.NewSender(d.Clients.SQS), Flow: flow.NewStore(d.Clients.DynamoDB, t.StateTable()),
			Alerts: alerts, Notify: d.notifier(m, log), Metrics: m, Log: log,
			// The census judges a version in flight by the workflows every function loads.
			Census: &supervisor.Census{Store: store, Workflows: d.Config.Workflows, Alerts: alerts}}
}
