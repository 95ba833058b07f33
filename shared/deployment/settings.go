package deployment

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// DefaultPrefix names a deployment's resources when nothing else does: the
// stack's, sasctl's and the local stacks' (topology.DefaultPrefix).
const DefaultPrefix = topology.DefaultPrefix

// Settings are what configures a deployment: the CDK context sets them at
// synth, the stack hands the functions theirs as environment variables, and
// sasctl's commands take theirs as flags. Table says, for each, its names in
// those three places, its default and its check.
type Settings struct {
	// Topology holds the prefix, the agents, the deadline index's shards,
	// the functions' timeout and the batching window.
	Topology topology.Topology
	// WorkflowFiles are the workflow files deployed (none: the example order
	// workflow).
	WorkflowFiles []string
	// Overrides override every workflow's steps (zero fields: the files').
	Overrides workflow.Settings
	// BacklogDepth is how many messages waiting make a queue backlogged: the
	// Supervisor then does not re-send a ready step's start into it.
	BacklogDepth int
	// AllowedReplyQueues are the URL prefixes an order's replyQueue may have
	// (none: no reply queues); the stack makes them from ReplyQueuePrefixes.
	AllowedReplyQueues []string
	// QueueURLBase and AlertTopicARN are the stack's resources.
	QueueURLBase  string // queue URL = QueueURLBase + "/" + name
	AlertTopicARN string
	// RemoteBaseURL fills ${SAS_REMOTE_BASE_URL} in the workflows' endpoints.
	RemoteBaseURL string
	// SupervisorParallelism bounds the orders the Supervisor handles at once
	// (supervisor.Config.Parallel).
	SupervisorParallelism int
	// CensusEvery is how often the Supervisor counts the orders in flight
	// by workflow version and alerts on those of a version the deployment
	// no longer runs (supervisor.Config.CensusEvery).
	CensusEvery time.Duration
	// RetentionDays is how long an ended order stays in both tables before
	// DynamoDB's TTL deletes it (0: kept forever).
	RetentionDays int
	// PayloadBucket keeps the payloads over PayloadInlineBytes (an order, a
	// step's result, an event's data): a claim check travels in their place
	// (shared/kept). "": none, and a payload is inline only.
	PayloadBucket string
	// PayloadInlineBytes is the largest payload kept inline.
	PayloadInlineBytes int

	// The stack's alone.
	SupervisorRate     time.Duration // the Supervisor's schedule
	QueueWaitAlarm     time.Duration // the queue wait (ready to claimed) that alarms
	FailureRateAlarm   int           // the percentage of a workflow's ended orders failed over 5 minutes that alarms
	AlarmEmail         string        // subscribed to the alarm and alert topics
	ReplyQueuePrefixes []string      // the queue-name prefixes orders may name as their reply queue
	EventSenders       []string      // the principals the events queue's policy lets send
	AssetDir           string        // holds build/<function>/bootstrap (make build)
	// The event source mappings' MaximumConcurrency: Submission's, each of
	// the Scheduler's, and each Agent's whose workflow file sets none.
	SubmissionConcurrency, SchedulerConcurrency, AgentConcurrency int
	// TargetRate is the orders a second the deadline index's shards are
	// sized for (topology.ShardsFor); 0: deadlineShards says.
	TargetRate int
	// Tracing is the functions' exporter (shared/tracing): "otlp" to the
	// AWS Distro for OpenTelemetry layer ADOTLayerARN names (X-Ray), or to
	// OTLPEndpoint; "": on only if OTLPEndpoint is set; "off": off.
	Tracing      string
	ADOTLayerARN string
	// OTLPEndpoint is the OpenTelemetry collector the functions send their
	// spans to over OTLP/HTTP (their OTEL_EXPORTER_OTLP_ENDPOINT), and
	// OTLPHeadersSecret the Secrets Manager secret holding its headers
	// (an API key: read by each function at its start, never in the
	// template).
	OTLPEndpoint, OTLPHeadersSecret string
	// KMS is the key the stack's data is encrypted under: "" for AWS's own
	// keys, KMSCreate for a customer managed key the stack creates, or the
	// ARN of the customer's own key.
	KMS string
	// SealData seals each order's data and results under a data key of its
	// own, made by the KMS key (the stack's; shared/seal); DataKey is that
	// key, as the stack tells the functions whenever it has one ("":
	// nothing sealed, nothing opened). With DataKey and not SealData (it
	// was turned off), the functions open what was sealed before, and seal
	// what is made of it (results, events' data) under its order's data
	// key, but seal no new order.
	SealData bool
	DataKey  string
	// Network places functions in a VPC of the customer's (the stack's
	// alone; none: no function is).
	Network Network
}

// KMSCreate is the KMS setting that makes the stack create its own customer
// managed key.
const KMSCreate = "create"

// The defaults of the settings that bound a deployment's throughput
// (docs/capacity.md): each event source mapping's MaximumConcurrency, and
// how long an ended order is kept.
const (
	SubmissionConcurrencyDefault = 50
	SchedulerConcurrencyDefault  = 50
	AgentConcurrencyDefault      = 20
	RetentionDaysDefault         = statestore.DefaultRetentionDays
)

// DefaultSettings are the settings of a deployment nothing configures.
func DefaultSettings() Settings {
	return Settings{
		Topology:              topology.Default(DefaultPrefix),
		BacklogDepth:          supervisor.BacklogDepthDefault,
		SupervisorParallelism: supervisor.ParallelDefault,
		CensusEvery:           supervisor.CensusEveryDefault,
		RetentionDays:         RetentionDaysDefault,
		PayloadInlineBytes:    kept.DefaultInline,
		SupervisorRate:        time.Minute,
		QueueWaitAlarm:        5 * time.Minute,
		FailureRateAlarm:      5,
		AssetDir:              "build",
		SubmissionConcurrency: SubmissionConcurrencyDefault,
		SchedulerConcurrency:  SchedulerConcurrencyDefault,
		AgentConcurrency:      AgentConcurrencyDefault,
	}
}

// Retention is how long the deployment keeps an ended order (0: forever),
// its RetentionDays.
func (s Settings) Retention() time.Duration { return time.Duration(s.RetentionDays) * 24 * time.Hour }

// Validate checks what one setting alone cannot: the settings together.
// (Each setting's own check runs when it is read: Setting.Value.)
func (s Settings) Validate() error {
	if err := s.Topology.Validate(); err != nil {
		return err
	}
	return s.Overrides.Validate()
}

// Setting is one row of Table: a setting's names in the CDK context, the
// functions' environment and sasctl's flags ("" where it has none), its
// default in words, and where its value is parsed and checked.
type Setting struct {
	Name    string // the docs' name; the CDK context key when it has one
	Context string // the CDK context key
	Env     string // the functions' environment variable
	Flag    string // sasctl's flag, without its dashes
	Default string // in words, when the value's own text does not say it ("": DefaultSettings')
	Usage   string // what it sets, and its check in words
	bind    func(*Settings) Value
}

// Value is a setting's value inside a Settings: Set parses and checks a
// text (a flag's, a context key's, an environment variable's); String is
// its text, which Set reads back. pflag.Value is this interface.
type Value interface {
	String() string
	Set(string) error
	Type() string
}

// Value is this setting's value in s.
func (st Setting) Value(s *Settings) Value { return st.bind(s) }

// DefaultText is the setting's default, as the docs' table says it.
func (st Setting) DefaultText() string {
	if st.Default != "" {
		return st.Default
	}
	def := DefaultSettings()
	if v := st.bind(&def).String(); v != "" {
		return v
	}
	return "none"
}

var (
	prefixPattern  = &pattern{regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31}$`), "1-32 letters, digits, - or _, starting with a letter"}
	urlPattern     = &pattern{regexp.MustCompile(`^https?://\S+$`), "an http(s) URL"}
	tracingPattern = &pattern{regexp.MustCompile(`^(otlp|off)?$`), "otlp or off"}
	secretPattern  = &pattern{regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{1,512}$|^arn:aws[a-z-]*:secretsmanager:\S+$`), "a Secrets Manager secret's name or ARN"}
	kmsPattern     = &pattern{regexp.MustCompile(`^(create|arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+)$`), "create, or a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"}
	layerPattern   = &pattern{regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+$`), "a Lambda layer version ARN"}
	// queuePrefixPattern is the start of a queue name: the IAM grant and the
	// functions' check both take a reply queue prefix as one.
	queuePrefixPattern = &pattern{regexp.MustCompile(`^[A-Za-z0-9_-]{1,79}$`), "the start of a queue name (1-79 letters, digits, - or _)"}
	// principalPattern is an account id, or an IAM role's or user's ARN.
	principalPattern = &pattern{regexp.MustCompile(`^([0-9]{12}|arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]{1,512})$`),
		"an AWS account id (12 digits) or an IAM role or user ARN"}
)

// Table is every setting of a deployment, once: the stack reads the CDK
// context by it (FromContext), the functions their environment (FromEnv,
// and the stack writes it with Env), and sasctl makes its flags from it.
// A new setting is a row here and a field of Settings.
var Table = []Setting{
	{Name: "prefix", Context: "prefix", Env: EnvPrefix, Flag: "prefix",
		Usage: "the deployment's name: every resource's name starts with it (1-32 letters, digits, - or _, starting with a letter)",
		bind:  func(s *Settings) Value { return required(&s.Topology.Prefix, prefixPattern) }},
	{Name: "workflows", Context: "workflows", Env: EnvWorkflows, Flag: "workflows", Default: "the example order workflow",
		Usage: "workflow files, comma-separated; an order naming no workflow runs the first file's",
		bind:  func(s *Settings) Value { return list(&s.WorkflowFiles) }},
	{Name: "stepTimeout", Context: "stepTimeout", Env: EnvStepTimeout, Flag: "step-timeout", Default: "the files'",
		Usage: "overrides every step's timeout (CompleteBy = claim + this), but an async step's; at most the agent function's timeout less 5s",
		bind:  func(s *Settings) Value { return duration(&s.Overrides.StepTimeout, 0) }},
	{Name: "maxFailures", Context: "maxFailures", Env: EnvMaxFailures, Flag: "max-failures", Default: "the files'",
		Usage: "overrides every step's failure threshold: attempts that do not complete before it is an Error",
		bind:  func(s *Settings) Value { return number(&s.Overrides.MaxFailures, 0, 1000) }},
	{Name: "retryBackoff", Context: "retryBackoff", Env: EnvRetryBackoff, Flag: "retry-backoff", Default: "the files'",
		Usage: "overrides every step's retry backoff: the Supervisor's, doubling per failure, at most 15m",
		bind:  func(s *Settings) Value { return duration(&s.Overrides.RetryBackoff, 0) }},
	{Name: "pickupTimeout", Context: "pickupTimeout", Env: EnvPickupTimeout, Flag: "pickup-timeout", Default: "the files'",
		Usage: "overrides every workflow's pickup timeout: when the Supervisor first looks at a ready step nobody claimed (never a failure)",
		bind:  func(s *Settings) Value { return duration(&s.Overrides.PickupTimeout, 0) }},
	{Name: "orderDeadline", Context: "orderDeadline", Env: EnvOrderDeadline, Flag: "order-deadline", Default: "the files'",
		Usage: "overrides every workflow's deadline: an order not ended by then fails for good",
		bind:  func(s *Settings) Value { return duration(&s.Overrides.OrderDeadline, 0) }},
	{Name: "backlogDepth", Context: "backlogDepth", Env: EnvBacklogDepth, Flag: "backlog-depth",
		Usage: "messages waiting that make a queue backlogged: the Supervisor re-sends nothing into it",
		bind:  func(s *Settings) Value { return number(&s.BacklogDepth, 1, 1_000_000) }},
	{Name: "supervisorRate", Context: "supervisorRate", Flag: "supervisor-rate",
		Usage: "the Supervisor's schedule (deployed: whole minutes)",
		bind:  func(s *Settings) Value { return duration(&s.SupervisorRate, time.Millisecond) }},
	{Name: "censusEvery", Context: "censusEvery", Env: EnvCensusEvery, Flag: "census-every",
		Usage: "how often the Supervisor counts the orders in flight by workflow version (over as many of its runs as it takes) and alerts on those of a version the deployment no longer runs: OrdersOfUndeployedVersionsAlarm (at least 1s)",
		bind:  func(s *Settings) Value { return duration(&s.CensusEvery, time.Second) }},
	{Name: "batchWindowSeconds", Context: "batchWindowSeconds", Flag: "batch-window-seconds",
		Usage: "every event source mapping's batching window, whole seconds from 0 to 300",
		bind:  func(s *Settings) Value { return seconds(&s.Topology.BatchWindow, 300) }},
	{Name: "queueWaitAlarm", Context: "queueWaitAlarm",
		Usage: "the queue wait (a step ready to claimed) that raises QueueWaitAlarm",
		bind:  func(s *Settings) Value { return duration(&s.QueueWaitAlarm, time.Minute) }},
	{Name: "failureRateAlarm", Context: "failureRateAlarm",
		Usage: "the percentage (1 to 100) of a workflow's orders ended in 5 minutes that ended Failed or CompensationFailed that raises its FailureRateAlarm",
		bind:  func(s *Settings) Value { return number(&s.FailureRateAlarm, 1, 100) }},
	{Name: "alarmEmail", Context: "alarmEmail",
		Usage: "an address subscribed to the alarm and alert topics",
		bind:  func(s *Settings) Value { return text(&s.AlarmEmail, nil) }},
	{Name: "allowedReplyQueuePrefixes", Context: "allowedReplyQueuePrefixes",
		Usage: "the starts of the names of the queues (in the stack's account and region) an order may name as its replyQueue, comma-separated; a replyQueue URL is parsed and must be exactly such a queue (none: no reply queues)",
		bind:  func(s *Settings) Value { return listOf(&s.ReplyQueuePrefixes, queuePrefixPattern) }},
	{Name: "allowedReplyQueues", Env: EnvAllowedReplyQueues, Default: "from allowedReplyQueuePrefixes",
		Usage: "the reply queues an order may name: queue URLs ending in a name prefix (the stack sets it from allowedReplyQueuePrefixes)",
		bind:  func(s *Settings) Value { return list(&s.AllowedReplyQueues) }},
	{Name: "eventSenders", Context: "eventSenders",
		Usage: "who may send events and callbacks to the events queue, comma-separated: AWS account ids or IAM role or user ARNs, granted by the queue's policy (identities of the stack's account may also be granted by their own IAM policies); a submitter of orders is not one unless named",
		bind:  func(s *Settings) Value { return listOf(&s.EventSenders, principalPattern) }},
	{Name: "remoteBaseUrl", Context: "remoteBaseUrl", Env: EnvRemoteBaseURL,
		Usage: "fills ${SAS_REMOTE_BASE_URL} in the workflows' endpoints; an http(s) URL",
		bind:  func(s *Settings) Value { return text(&s.RemoteBaseURL, urlPattern) }},
	{Name: "tracing", Context: "tracing", Env: "SAS_TRACING", Default: "off",
		Usage: "one OpenTelemetry trace per order: otlp exports each function's spans to the ADOT Lambda layer's collector (adotLayerArn), which sends them to X-Ray, or to otlpEndpoint; off: none, even with otlpEndpoint",
		bind:  func(s *Settings) Value { return text(&s.Tracing, tracingPattern) }},
	{Name: "adotLayerArn", Context: "adotLayerArn",
		Usage: "the AWS Distro for OpenTelemetry Lambda layer (arm64, collector) of your region, for tracing=otlp",
		bind:  func(s *Settings) Value { return text(&s.ADOTLayerARN, layerPattern) }},
	{Name: "otlpEndpoint", Context: "otlpEndpoint", Env: "OTEL_EXPORTER_OTLP_ENDPOINT",
		Usage: "one OpenTelemetry trace per order, sent over OTLP/HTTP to this collector (Jaeger, Grafana Tempo, Honeycomb's https://api.honeycomb.io): the functions' OTEL_EXPORTER_OTLP_ENDPOINT; no ADOT layer needed",
		bind:  func(s *Settings) Value { return text(&s.OTLPEndpoint, urlPattern) }},
	{Name: "otlpHeadersSecret", Context: "otlpHeadersSecret", Env: "SAS_OTLP_HEADERS_SECRET",
		Usage: "the Secrets Manager secret (name or ARN) whose text is the headers otlpEndpoint wants, as OTEL_EXPORTER_OTLP_HEADERS writes them (x-honeycomb-team=KEY): each function reads it when it starts",
		bind:  func(s *Settings) Value { return text(&s.OTLPHeadersSecret, secretPattern) }},
	{Name: "kms", Context: "kms", Default: "AWS's own keys",
		Usage: "the customer managed KMS key the tables, every queue and DLQ, the topics and the log groups are encrypted under: create (the stack creates one, rotated yearly, kept when the stack is deleted) or your key's ARN (its key policy must let CloudWatch Logs, CloudWatch alarms and SNS use it: docs/operations.md)",
		bind:  func(s *Settings) Value { return text(&s.KMS, kmsPattern) }},
	{Name: "sealData", Context: "sealData", Env: EnvSealData, Flag: "seal-data", Default: "off",
		Usage: "true: each order's data, its results and its events' data sealed under a data key of its own (AES-256-GCM, made by the kms key, which it needs), so that the tables, the queues, the payload bucket and the logs hold ciphertext only (but what operations.md's \"What stays in clear\" lists); sasctl status and the console open it only with kms:Decrypt on the key. Turned off (the kms key kept), new orders are not sealed, and those sealed before run to their end",
		bind:  func(s *Settings) Value { return boolean(&s.SealData) }},
	{Name: "dataKey", Env: EnvDataKey, Default: "set by the stack",
		Usage: "the stack's kms key, whenever it has one: with sealData, each new order's data key is made under it; without, the data sealed before under it is opened",
		bind:  func(s *Settings) Value { return text(&s.DataKey, nil) }},
	{Name: "vpcId", Context: "vpcId",
		Usage: "the VPC (vpc-…) whose services the functions reach: they are placed in it (vpcFunctions), with the VPC endpoints they then need, so that no NAT gateway is (docs/operations.md, docs/cost.md)",
		bind:  func(s *Settings) Value { return text(&s.Network.VPCID, vpcPattern) }},
	{Name: "vpcSubnets", Context: "vpcSubnets",
		Usage: "the subnets (subnet-…, comma-separated; private, at most one per Availability Zone) of every function placed, unless its agent names its own (agentNetworks), and where the interface endpoints go",
		bind:  func(s *Settings) Value { return listOf(&s.Network.Subnets, subnetPattern) }},
	{Name: "vpcSecurityGroups", Context: "vpcSecurityGroups", Default: "one the stack makes",
		Usage: "the security groups (sg-…, comma-separated) of every function placed, unless its agent names its own; none: one the stack makes, which lets everything out and nothing in (output FunctionsSecurityGroupId)",
		bind:  func(s *Settings) Value { return listOf(&s.Network.SecurityGroups, sgPattern) }},
	{Name: "vpcRouteTables", Context: "vpcRouteTables",
		Usage: "the route tables (rtb-…, comma-separated) of the functions' subnets: the DynamoDB and S3 gateway endpoints are added to them",
		bind:  func(s *Settings) Value { return listOf(&s.Network.RouteTables, rtbPattern) }},
	{Name: "vpcFunctions", Context: "vpcFunctions", Default: "every function",
		Usage: "the functions placed in the VPC, comma-separated: submission, scheduler, supervisor or an agent's name; the others stay out",
		bind:  func(s *Settings) Value { return listOf(&s.Network.Functions, fnNamePattern) }},
	{Name: "agentNetworks", Context: "agentNetworks",
		Usage: "agents' own subnets and security groups, in place of vpcSubnets' and vpcSecurityGroups' (each kind it names): AGENT=ID,ID;AGENT=ID, the ids subnet-… and sg-…, the agents placed (vpcFunctions)",
		bind:  func(s *Settings) Value { return networks(&s.Network.AgentNetworks) }},
	{Name: "vpcExistingEndpoints", Context: "vpcExistingEndpoints",
		Usage: "the VPC endpoints the VPC already has, which the stack does not make: all, or some of " + strings.Join(EndpointServices, ", ") + " (comma-separated); the stack makes the others the functions placed need",
		bind:  func(s *Settings) Value { return listOf(&s.Network.ExistingEndpoints, endpointPattern) }},
	{Name: "assetDir", Context: "assetDir",
		Usage: "the folder of the built functions (make build)",
		bind:  func(s *Settings) Value { return text(&s.AssetDir, nil) }},
	{Name: "agents", Env: EnvAgents, Flag: "agents", Default: "the workflows' agents",
		Usage: "the deployment's agents, comma-separated (sasctl: found from the deployment's queues)",
		bind:  func(s *Settings) Value { return list(&s.Topology.Agents) }},
	{Name: "deadlineShards", Context: "deadlineShards", Env: EnvShards, Flag: "deadline-shards",
		Usage: fmt.Sprintf("partitions of the deadline index, 1 to %d: each takes about %d index writes a second and an order makes %d; raise it, never lower it (an order waiting in a shard no longer swept is not looked at)",
			topology.MaxDeadlineShards, topology.PartitionWritesPerSecond, topology.IndexWritesPerOrder),
		bind: func(s *Settings) Value { return number(&s.Topology.DeadlineShards, 1, topology.MaxDeadlineShards) }},
	{Name: "targetRate", Context: "targetRate", Flag: "target-rate", Default: "none",
		Usage: fmt.Sprintf("orders a second the deadline index is sized for: deadlineShards becomes the rate's index writes over half a partition's (rate/%d, rounded up; not with deadlineShards)",
			topology.PartitionWritesPerSecond/2/topology.IndexWritesPerOrder),
		bind: func(s *Settings) Value {
			return number(&s.TargetRate, 0, topology.MaxDeadlineShards*topology.PartitionWritesPerSecond/2/topology.IndexWritesPerOrder)
		}},
	{Name: "submissionConcurrency", Context: "submissionConcurrency", Flag: "submission-concurrency",
		Usage: "the most Submission instances at once (its event source mapping's MaximumConcurrency, 2 to 1000)",
		bind:  func(s *Settings) Value { return number(&s.SubmissionConcurrency, 2, 1000) }},
	{Name: "schedulerConcurrency", Context: "schedulerConcurrency", Flag: "scheduler-concurrency",
		Usage: "the most Scheduler instances at once on each of its queues (the scheduler queue, each agent's responses), 2 to 1000",
		bind:  func(s *Settings) Value { return number(&s.SchedulerConcurrency, 2, 1000) }},
	{Name: "agentConcurrency", Context: "agentConcurrency", Flag: "agent-concurrency",
		Usage: "the most instances at once of each Agent whose workflow file sets no concurrency (2 to 1000; it protects the agent's service)",
		bind:  func(s *Settings) Value { return number(&s.AgentConcurrency, 2, 1000) }},
	{Name: "supervisorParallelism", Context: "supervisorParallelism", Env: EnvSupervisorParallelism, Flag: "supervisor-parallelism",
		Usage: "the orders the Supervisor's sweep handles at once, across every shard (1 to 256): its looks a second grow with it",
		bind:  func(s *Settings) Value { return number(&s.SupervisorParallelism, 1, 256) }},
	{Name: "retentionDays", Context: "retentionDays", Env: EnvRetentionDays, Flag: "retention-days",
		Usage: "days an ended order stays in both tables before DynamoDB's TTL deletes it (0 to 3650; 0: kept forever); an order keeps the retention it was submitted with (sasctl: the deployment's, for an order stored before orders kept theirs)",
		bind:  func(s *Settings) Value { return number(&s.RetentionDays, 0, 3650) }},
	{Name: "payloadInlineBytes", Context: "payloadInlineBytes", Env: EnvPayloadInlineBytes, Flag: "payload-inline-bytes",
		Usage: fmt.Sprintf("the largest order, result or event data kept inline in a message or an item (%d to %d bytes): a larger one goes to the payload bucket, a claim check in its place",
			kept.MinInline, kept.MaxInline),
		bind: func(s *Settings) Value { return number(&s.PayloadInlineBytes, kept.MinInline, kept.MaxInline) }},
	{Name: "payloadBucket", Env: EnvPayloadBucket, Flag: "payload-bucket", Default: "set by the stack",
		Usage: "the bucket that keeps payloads over payloadInlineBytes (the stack's output PayloadBucketName; sasctl submit keeps an order over SQS's 256 KiB there)",
		bind:  func(s *Settings) Value { return text(&s.PayloadBucket, nil) }},
	{Name: "functionTimeout", Env: EnvFunctionTimeout, Flag: "function-timeout",
		Usage: "the queue-driven functions' timeout; a step's may be at most this less 5s",
		bind:  func(s *Settings) Value { return duration(&s.Topology.FunctionTimeout, StepTimeoutMargin+time.Second) }},
	{Name: "queueUrlBase", Env: EnvQueueURLBase, Default: "set by the stack",
		Usage: "what the queues' URLs start with",
		bind:  func(s *Settings) Value { return text(&s.QueueURLBase, nil) }},
	{Name: "alertTopicArn", Env: EnvAlertTopicARN, Default: "set by the stack",
		Usage: "the alert topic",
		bind:  func(s *Settings) Value { return text(&s.AlertTopicARN, nil) }},
}

// Lookup returns the setting of a name.
func Lookup(name string) (Setting, bool) {
	for _, st := range Table {
		if st.Name == name {
			return st, true
		}
	}
	return Setting{}, false
}

// FromContext reads the settings the CDK context sets (get returns "" for a
// key it lacks) over the defaults; a bad value is an error naming its key.
func FromContext(get func(string) string) (Settings, error) {
	s := DefaultSettings()
	for _, st := range Table {
		if v := get(st.Context); st.Context != "" && v != "" {
			if err := st.Value(&s).Set(v); err != nil {
				return s, fmt.Errorf("context %s=%q: %w", st.Context, v, err)
			}
		}
	}
	if s.TargetRate > 0 {
		if get("deadlineShards") != "" {
			return s, fmt.Errorf("context targetRate=%d and deadlineShards=%s: set one (targetRate sizes the shards)", s.TargetRate, get("deadlineShards"))
		}
		s.Topology.DeadlineShards = topology.ShardsFor(s.TargetRate)
	}
	return s, nil
}

// readEnv reads the settings the environment sets over s; a bad value is an
// error naming its variable.
func (s *Settings) readEnv(getenv func(string) string) error {
	for _, st := range Table {
		if v := getenv(st.Env); st.Env != "" && v != "" {
			if err := st.Value(s).Set(v); err != nil {
				return fmt.Errorf("%s=%q: %w", st.Env, v, err)
			}
		}
	}
	return nil
}

// Env is the environment that describes s: every setting with a variable,
// but those left at nothing (an empty text or list, a zero number or
// duration) where nothing is their default too, which FromEnv reads as
// their defaults. (A zero whose default is not, retentionDays=0, is written.)
func (s Settings) Env() map[string]string {
	env := map[string]string{}
	for _, st := range Table {
		if v := st.Value(&s).String(); st.Env != "" && v != "" && !st.zeroDefault(v) {
			env[st.Env] = v
		}
	}
	return env
}

// zeroDefault says v is a zero number or duration and the setting's default
// too.
func (st Setting) zeroDefault(v string) bool {
	if v != "0" && v != "0s" {
		return false
	}
	def := DefaultSettings()
	return st.bind(&def).String() == v
}
