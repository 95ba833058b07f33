// Package localrun assembles the whole pipeline on local AWS emulators: it
// provisions the topology, composes the same handlers the Lambda mains run,
// and drives them with the local runner. `make run` and the integration tests
// both use it.
package localrun

import (
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/agentauth"
	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/devkit/runner"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Options configure a local stack.
type Options struct {
	Endpoint         string            // the emulator; "" lets the SDK read AWS_ENDPOINT_URL
	DynamoDBEndpoint string            // a separate DynamoDB emulator (e.g. DynamoDB Local), if any
	QueuesEndpoint   string            // separate SQS and SNS (the in-process queues of sqsmem), if any
	Meter            *accounting.Meter // counts every AWS request by function, if set
	// PayloadInline is the largest payload kept inline (default
	// payload.DefaultInline); a larger one goes to the payload bucket.
	PayloadInline int
	// SealData seals each order's data under a data key of its own, made by
	// a KMS key of the emulator's (alias/<prefix>-data).
	SealData  bool
	BatchSize int    // messages per invocation, like an event source mapping's (default 10)
	Prefix    string // resource name prefix (default deployment.DefaultPrefix)
	// Workflows are the workflows the stack runs (default: the example
	// order workflow), with Settings' overrides.
	Workflows workflow.Set
	Settings  workflow.Settings
	// RemoteURL is the remote simulator's base URL: it fills
	// ${SAS_REMOTE_BASE_URL} in the workflows' agent declarations; Vars fill
	// the others (a name not in Vars is read from the environment).
	RemoteURL string
	Vars      map[string]string
	// Endpoints, by agent name, replace its declaration's endpoint once
	// resolved (sasctl dev's fault proxy in front of a service of your own).
	Endpoints map[string]string
	// Remotes are the Agents written in Go (custom: true), by agent name.
	Remotes map[string]agent.Remote

	VisibilityTimeout time.Duration // of every queue (default 30s)
	// DeadlineShards partitions the deadline index (default 1: an emulator's
	// index query walks the whole table, once per shard).
	DeadlineShards  int
	Schedulers      int           // scheduler instances (default 1)
	Supervisors     int           // supervisor instances (default 1)
	SupervisorEvery time.Duration // the scheduled rule's rate (default 1s)
	// CensusEvery is how often the Supervisor's census of the versions in
	// flight begins a pass (default supervisor.CensusEveryDefault; a
	// stack's first sweep begins one either way).
	CensusEvery time.Duration
	Pollers     int // pollers per queue and function instance (default 2)
	// AgentPollers are each agent queue's pollers (default 4×Pollers: an
	// agent's batch waits for its slowest remote call, up to the step
	// timeout, and Lambda would run more copies meanwhile).
	AgentPollers int
	BatchWindow  time.Duration // each event source mapping's batching window (default none; a deployment's is topology.DefaultBatchWindow)
	// BacklogDepth is how many messages waiting make a queue backlogged for
	// the Supervisor (default supervisor.BacklogDepthDefault).
	BacklogDepth int
	AgentBackoff resilience.Backoff
	// AllowedReplyQueues are the URL prefixes an order's replyQueue may have
	// (default: the queues named <prefix>-client-…, see ClientQueuePrefix).
	AllowedReplyQueues []string
	// Throttle caps functions' pace, by function name ("scheduler",
	// "agent-payment"): each message takes this long of the function's one
	// invocation at a time, as a function at its maximum concurrency.
	Throttle map[string]time.Duration
	// Stopped functions are not run at all (their queues fill up).
	Stopped  []string
	Faults   runner.Faults
	DelayFor time.Duration      // how long a Delay fault hides a message
	Crash    func(point string) // crash hook set on every handler (chaos tests)
	// StoreFaults wraps the HTTP client of the handlers' DynamoDB client
	// (chaos's state store faults, which the SDK's tries meet as they
	// would AWS's); Stack.Store reads and writes the engine itself.
	StoreFaults func(dynamodb.HTTPClient) dynamodb.HTTPClient
	Log         *slog.Logger // handler logs (default: discarded)
	Metrics     io.Writer    // EMF lines, besides the stack's own tally
}

// Stack is a provisioned local deployment.
type Stack struct {
	Opts       Options
	Deployment *deployment.Deployment
	Resources  *provision.Resources
	Store      *statestore.Store
	Tally      *metrics.Tally // every EMF metric the handlers emitted
	Stats      *runner.Stats  // invocations by function, across runner restarts
	AlertInbox string         // a queue subscribed to the alert topic
	offloads   offloadNames
}

// offloadNames names the bodies a stack's senders offload (send): by their
// hash and how many with that hash went before, so that a seeded run's
// pointer messages, and what its faults pick by a message's body, replay;
// and each message has an object of its own, as the SQS Extended Client's
// do.
type offloadNames struct {
	mu   sync.Mutex
	sent map[[sha256.Size]byte]int
}

// next is body's name.
func (n *offloadNames) next(body []byte) string {
	sum := sha256.Sum256(body)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sent == nil {
		n.sent = map[[sha256.Size]byte]int{}
	}
	n.sent[sum]++
	return fmt.Sprintf("%x-%d", sum[:16], n.sent[sum])
}

// New provisions the resources (idempotently) and composes the handlers.
func New(ctx context.Context, o Options) (*Stack, error) {
	o = o.withDefaults()
	copts := awsclient.Options{Endpoint: o.Endpoint, DynamoDBEndpoint: o.DynamoDBEndpoint, QueuesEndpoint: o.QueuesEndpoint, Emulated: true}
	if o.Meter != nil {
		copts.APIOptions = append(copts.APIOptions, o.Meter.AddTo)
	}
	clients, err := awsclient.Load(ctx, copts)
	if err != nil {
		return nil, err
	}
	set := o.Workflows.With(o.Settings)
	topo := topology.Default(o.Prefix, set.Agents()...)
	topo.VisibilityTimeout = o.VisibilityTimeout
	topo.DeadlineShards = max(o.DeadlineShards, 1)
	topo.BatchWindow = o.BatchWindow
	if err := o.Check(); err != nil {
		return nil, err
	}
	res, err := provision.Ensure(ctx, clients, topo)
	if err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	var dataKey string
	if o.SealData {
		if dataKey, err = provision.EnsureKey(ctx, clients.KMS, "alias/"+o.Prefix+"-data"); err != nil {
			return nil, fmt.Errorf("provision: %w", err)
		}
	}
	ordersURL := res.URL(topo.OrdersQueue().Name)
	cfg := deployment.Config{Settings: deployment.Settings{
		Topology: topo, QueueURLBase: strings.TrimSuffix(ordersURL, "/"+topo.OrdersQueue().Name),
		AlertTopicARN: res.TopicARN, Overrides: o.Settings, AllowedReplyQueues: o.AllowedReplyQueues,
		BacklogDepth: o.BacklogDepth, PayloadBucket: res.PayloadBucket, PayloadInlineBytes: o.PayloadInline,
		SealData: o.SealData, DataKey: dataKey, CensusEvery: o.CensusEvery,
	}, Workflows: set, AgentBackoff: o.AgentBackoff}
	if len(cfg.AllowedReplyQueues) == 0 {
		cfg.AllowedReplyQueues = []string{cfg.QueueURL(ClientQueuePrefix(o.Prefix))}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tally := metrics.NewTally()
	var w io.Writer = tally
	if o.Metrics != nil {
		w = io.MultiWriter(tally, metrics.Locked(o.Metrics))
	}
	d := &deployment.Deployment{Config: cfg, Clients: clients, Log: o.Log, Metrics: w, Remotes: o.Remotes,
		Vars: o.vars(), Auth: localAuth(clients), Endpoints: o.Endpoints}
	s := &Stack{Opts: o, Deployment: d, Resources: res, Store: d.Store(), Tally: tally, Stats: runner.NewStats()}
	if o.StoreFaults != nil {
		d.Clients.DynamoDB = dynamodb.New(clients.DynamoDB.Options(), func(opts *dynamodb.Options) {
			opts.HTTPClient = o.StoreFaults(opts.HTTPClient)
		})
	}
	if s.AlertInbox, err = s.subscribeInbox(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Check says why the options cannot run, before anything starts: a pickup
// timeout too short for the batching window, or an order deadline shorter
// than a wait or a timer.
func (o Options) Check() error {
	o = o.withDefaults()
	set := o.Workflows.With(o.Settings)
	if err := deployment.CheckDeadlines(set); err != nil {
		return fmt.Errorf("%w (--order-deadline)", err)
	}
	return deployment.CheckPickupTimeouts(set, o.BatchWindow)
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = deployment.DefaultPrefix
	}
	if o.Workflows.IsZero() {
		o.Workflows = DefaultWorkflows()
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = 30 * time.Second
	}
	o.Schedulers, o.Supervisors, o.Pollers = max(o.Schedulers, 1), max(o.Supervisors, 1), max(o.Pollers, 2)
	if o.AgentPollers <= 0 {
		o.AgentPollers = 4 * o.Pollers
	}
	if o.SupervisorEvery <= 0 {
		o.SupervisorEvery = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// subscribeInbox creates a queue subscribed to the alert topic, where a
// local operator (or a test) reads the failure events.
func (s *Stack) subscribeInbox(ctx context.Context) (string, error) {
	c := s.Deployment.Clients
	name := s.Topology().AlertInbox()
	q, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("create alert inbox: %w", err)
	}
	a, err := c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("alert inbox ARN: %w", err)
	}
	_, err = c.SNS.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(s.Resources.TopicARN),
		Protocol: aws.String("sqs"), Endpoint: aws.String(a.Attributes["QueueArn"]),
		Attributes: map[string]string{"RawMessageDelivery": "true"}})
	if err != nil {
		return "", fmt.Errorf("subscribe alert inbox: %w", err)
	}
	return aws.ToString(q.QueueUrl), nil
}

// DefaultWorkflows are what a stack runs given no workflows: the example
// order workflow.
func DefaultWorkflows() workflow.Set {
	return workflow.MustSet(workflow.MustExample(workflow.OrderWorkflow))
}

// ClientQueuePrefix is the name prefix of the reply queues a local stack
// allows by default.
func ClientQueuePrefix(prefix string) string { return prefix + "-client-" }

// QueueURL returns the URL of a queue of the topology.
func (s *Stack) QueueURL(name string) string { return s.Deployment.Config.QueueURL(name) }

// Topology is the stack's resource description.
func (s *Stack) Topology() topology.Topology { return s.Deployment.Config.Topology }

// vars fill the workflows' ${NAME}s: Vars, the simulator's URL, the environment.
func (o Options) vars() workflow.Vars {
	return func(name string) string {
		if v, ok := o.Vars[name]; ok {
			return v
		}
		if name == deployment.EnvRemoteBaseURL && o.RemoteURL != "" {
			return o.RemoteURL
		}
		return os.Getenv(name)
	}
}

// localAuth reads agents' credentials from the emulator, as a deployed
// Agent reads them from Secrets Manager and SSM.
func localAuth(c *awsclient.Clients) func(context.Context, workflow.Agent) (agent.Authorizer, error) {
	clients := agentauth.NewClients(c.Config)
	return func(ctx context.Context, a workflow.Agent) (agent.Authorizer, error) {
		return agentauth.For(ctx, clients, a)
	}
}
