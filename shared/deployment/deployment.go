// Package deployment composes the handlers from one deployment's
// configuration: the Lambda mains build it from environment variables, the
// local stack from the resources it provisioned. Queue URLs derive from the
// topology's names and one base URL, so the two cannot disagree.
package deployment

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/scheduler"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/submission"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Config is one deployment.
type Config struct {
	Topology      topology.Topology
	QueueURLBase  string // queue URL = QueueURLBase + "/" + name
	AlertTopicARN string
	Settings      workflow.Settings
	RemoteBaseURL string // the remote services' base URL (agents only)
	// AllowedReplyQueues are the URL prefixes an order's replyQueue may have.
	AllowedReplyQueues notify.Allowed
	AgentBackoff       resilience.Backoff
	Breaker            BreakerConfig
	// BacklogDepth is how many messages waiting make a queue backlogged: the
	// Supervisor then neither re-sends into it nor judges an attempt whose
	// reply may be in it (0: supervisor.DefaultBacklogDepth).
	BacklogDepth int
}

// BreakerConfig configures each Agent's circuit breaker.
type BreakerConfig struct {
	Threshold int
	Cooldown  time.Duration
}

// Workflow is the workflow the deployment runs (Settings.Workflow; Validate
// rejects an unknown name, which falls back to the order workflow here).
func (c Config) Workflow() workflow.Definition {
	d, err := workflow.For(c.Settings)
	if err != nil {
		return workflow.Orders(c.Settings)
	}
	return d
}

// QueueURL is the URL of the named queue.
func (c Config) QueueURL(name string) string { return c.QueueURLBase + "/" + name }

// Validate checks the configuration, including the workflow definition.
func (c Config) Validate() error {
	if err := c.Topology.Validate(); err != nil {
		return err
	}
	if c.QueueURLBase == "" || c.AlertTopicARN == "" {
		return fmt.Errorf("deployment: queue URL base and alert topic ARN are required")
	}
	if err := c.Settings.Validate(); err != nil {
		return err
	}
	if c.BacklogDepth < 0 {
		return fmt.Errorf("deployment: backlog depth must not be negative, not %d", c.BacklogDepth)
	}
	return c.Workflow().Validate(c.Topology.Agents)
}

// Deployment builds handlers over one configuration and set of clients.
type Deployment struct {
	Config  Config
	Clients *awsclient.Clients
	Log     *slog.Logger
	Metrics io.Writer // where EMF lines go (stdout in Lambda)
	HTTP    *http.Client
}

func (d *Deployment) emitter(fn string) *metrics.Emitter { return metrics.New(d.Metrics, fn) }

func (d *Deployment) notifier(m *metrics.Emitter, log *slog.Logger) *notify.Notifier {
	return notify.New(queue.NewSender(d.Clients.SQS), d.Config.AllowedReplyQueues, m, log)
}

// Store is the state store of the deployment.
func (d *Deployment) Store() *statestore.Store {
	t := d.Config.Topology
	return statestore.New(d.Clients.DynamoDB, t.OrdersTable(), t.StateTable(), t.DeadlineShards)
}

// Submission builds the Submission handler.
func (d *Deployment) Submission() (*submission.Handler, error) {
	t := d.Config.Topology
	m, log := d.emitter("submission"), d.Log.With("function", "submission")
	return submission.New(submission.Config{
		Workflow:           d.Config.Workflow(),
		AgentQueues:        d.agentRequestQueues(),
		DLQURL:             d.Config.QueueURL(t.OrdersQueue().DLQName),
		AllowedReplyQueues: d.Config.AllowedReplyQueues,
	}, submission.Deps{Store: d.Store(), Send: queue.NewSender(d.Clients.SQS), Notify: d.notifier(m, log), Metrics: m, Log: log})
}

// Scheduler builds a Scheduler handler.
func (d *Deployment) Scheduler() (*scheduler.Handler, error) {
	m, log := d.emitter("scheduler"), d.Log.With("function", "scheduler")
	return scheduler.New(scheduler.Config{
		Workflow: d.Config.Workflow(), AgentQueues: d.agentRequestQueues(),
		DLQURL: d.Config.QueueURL(d.Config.Topology.SchedulerQueue().DLQName),
	}, scheduler.Deps{Store: d.Store(), Send: queue.NewSender(d.Clients.SQS),
		Alerts: alert.New(d.Clients.SNS, d.Config.AlertTopicARN, m), Notify: d.notifier(m, log), Metrics: m, Log: log})
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
// carry instanceID.
func (d *Deployment) Agent(name, instanceID string) *agent.Handler {
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
	client := d.HTTP
	if client == nil {
		client = &http.Client{}
	}
	return agent.New(agent.Config{
		Name: name, InstanceID: instanceID, ResponseQueueURL: d.Config.QueueURL(t.AgentResponses(name).Name),
		DLQURL: d.Config.QueueURL(t.AgentRequests(name).DLQName), Backoff: backoff,
		CallTimeout: 10 * time.Second, Margin: 100 * time.Millisecond,
	}, agent.Deps{Remote: &agent.HTTPRemote{Base: d.Config.RemoteBaseURL, Service: name, Client: client},
		Breaker: &resilience.Breaker{Threshold: b.Threshold, Cooldown: b.Cooldown}, Store: d.Store(),
		Send: queue.NewSender(d.Clients.SQS), Metrics: d.emitter(fn), Log: d.Log.With("function", fn, "instance", instanceID)})
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
	agents := map[string]supervisor.AgentQueues{}
	for _, a := range t.Agents {
		agents[a] = supervisor.AgentQueues{Requests: d.Config.QueueURL(t.AgentRequests(a).Name),
			Responses: d.Config.QueueURL(t.AgentResponses(a).Name)}
	}
	return supervisor.Config{
			SchedulerQueueURL: d.Config.QueueURL(t.SchedulerQueue().Name), AgentQueues: agents,
			PickupTimeout: d.Config.Settings.PickupTimeout, BacklogDepth: d.Config.BacklogDepth,
			// A consumer holds a message at most its function's timeout,
			// and never past the queue's visibility timeout.
			InFlightGrace: min(t.FunctionTimeout, t.SchedulerQueue().VisibilityTimeout),
		}, supervisor.Deps{Store: d.Store(), Queues: queue.NewSender(d.Clients.SQS),
			Alerts: alert.New(d.Clients.SNS, d.Config.AlertTopicARN, m), Notify: d.notifier(m, log), Metrics: m, Log: log}
}
