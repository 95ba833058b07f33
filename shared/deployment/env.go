package deployment

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Environment variables a deployed function reads.
const (
	EnvPrefix        = "SAS_PREFIX"          // resource name prefix
	EnvAgents        = "SAS_AGENTS"          // comma-separated agent names (default: the workflows')
	EnvShards        = "SAS_DEADLINE_SHARDS" // partitions of the deadline index
	EnvQueueURLBase  = "SAS_QUEUE_URL_BASE"  // e.g. https://sqs.us-east-1.amazonaws.com/ACCOUNT
	EnvAlertTopicARN = "SAS_ALERT_TOPIC_ARN"
	// EnvWorkflows is a comma-separated list of workflow files (a relative
	// path is under LAMBDA_TASK_ROOT); none: the example order workflow.
	EnvWorkflows = "SAS_WORKFLOWS"
	// EnvRemoteBaseURL fills ${SAS_REMOTE_BASE_URL} in the example
	// workflows' endpoints (the remote simulator's, locally).
	EnvRemoteBaseURL = "SAS_REMOTE_BASE_URL"
	// Overrides of every workflow's steps (workflow.Settings); unset: as
	// the files say.
	EnvStepTimeout   = "SAS_STEP_TIMEOUT" // Go duration, e.g. 30s
	EnvMaxFailures   = "SAS_MAX_FAILURES"
	EnvRetryBackoff  = "SAS_RETRY_BACKOFF"
	EnvPickupTimeout = "SAS_PICKUP_TIMEOUT"
	EnvOrderDeadline = "SAS_ORDER_DEADLINE" // Go duration: an order not ended by then fails
	EnvBacklogDepth  = "SAS_BACKLOG_DEPTH"  // messages waiting that make a queue backlogged (supervisor)
	// EnvAllowedReplyQueues is a comma-separated list of queue URL prefixes
	// an order's replyQueue may start with (none: no reply queues).
	EnvAllowedReplyQueues = "SAS_ALLOWED_REPLY_QUEUES"
	// EnvFunctionTimeout is the queue-driven functions' timeout, which
	// bounds a step's (default the topology's).
	EnvFunctionTimeout = "SAS_FUNCTION_TIMEOUT"
)

// FromEnv reads a deployment's configuration and loads its workflow files;
// unset knobs keep their defaults. The workflows' ${NAME}s stay as written:
// an Agent fills its own (Deployment.Agent).
func FromEnv(getenv func(string) string) (Config, error) {
	prefix := getenv(EnvPrefix)
	if prefix == "" {
		return Config{}, fmt.Errorf("%s is not set", EnvPrefix)
	}
	c := Config{
		Topology:      topology.Default(prefix),
		QueueURLBase:  strings.TrimSuffix(getenv(EnvQueueURLBase), "/"),
		AlertTopicARN: getenv(EnvAlertTopicARN),
		BacklogDepth:  supervisor.DefaultBacklogDepth,
	}
	if v := getenv(EnvAllowedReplyQueues); v != "" {
		c.AllowedReplyQueues = strings.Split(v, ",")
	}
	if v := getenv(EnvWorkflows); v != "" {
		c.WorkflowFiles = strings.Split(v, ",")
	}
	if err := c.readKnobs(getenv); err != nil {
		return c, err
	}
	set, err := LoadWorkflows(c.WorkflowFiles, getenv("LAMBDA_TASK_ROOT"), c.MaxStepTimeout())
	if err != nil {
		return c, err
	}
	c.Workflows = set.With(c.Settings)
	c.Topology.Agents = set.Agents()
	if v := getenv(EnvAgents); v != "" {
		c.Topology.Agents = strings.Split(v, ",")
	}
	return c, c.Validate()
}

// LoadWorkflows loads workflow files (relative paths under root), or, with
// none, the example order workflow. A step timeout over maxStep is a problem.
func LoadWorkflows(files []string, root string, maxStep time.Duration) (workflow.Set, error) {
	if len(files) == 0 {
		return workflow.NewSet(workflow.MustExample(workflow.OrderWorkflow))
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f
		if !filepath.IsAbs(f) && root != "" {
			paths[i] = filepath.Join(root, f)
		}
	}
	return workflow.LoadFiles(paths, workflow.Options{MaxStepTimeout: maxStep})
}

// readKnobs reads the numbers and durations.
func (c *Config) readKnobs(getenv func(string) string) error {
	var err error
	if v := getenv(EnvShards); v != "" {
		if c.Topology.DeadlineShards, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("%s=%q: %w", EnvShards, v, err)
		}
	}
	for name, dst := range map[string]*time.Duration{EnvStepTimeout: &c.Settings.StepTimeout,
		EnvRetryBackoff: &c.Settings.RetryBackoff, EnvPickupTimeout: &c.Settings.PickupTimeout,
		EnvOrderDeadline: &c.Settings.OrderDeadline, EnvFunctionTimeout: &c.Topology.FunctionTimeout} {
		if v := getenv(name); v != "" {
			if *dst, err = time.ParseDuration(v); err != nil {
				return fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	}
	for name, dst := range map[string]*int{EnvMaxFailures: &c.Settings.MaxFailures, EnvBacklogDepth: &c.BacklogDepth} {
		if v := getenv(name); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil {
				return fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	}
	return c.Settings.Validate()
}

// Env is the inverse of FromEnv: the variables that describe c.
func (c Config) Env() map[string]string {
	env := map[string]string{
		EnvPrefix: c.Topology.Prefix, EnvAgents: strings.Join(c.Topology.Agents, ","),
		EnvShards: strconv.Itoa(c.Topology.DeadlineShards), EnvQueueURLBase: c.QueueURLBase,
		EnvAlertTopicARN: c.AlertTopicARN, EnvBacklogDepth: strconv.Itoa(c.BacklogDepth),
		EnvAllowedReplyQueues: strings.Join(c.AllowedReplyQueues, ","),
		EnvFunctionTimeout:    c.Topology.FunctionTimeout.String(),
	}
	if len(c.WorkflowFiles) > 0 {
		env[EnvWorkflows] = strings.Join(c.WorkflowFiles, ",")
	}
	s := c.Settings
	for name, d := range map[string]time.Duration{EnvStepTimeout: s.StepTimeout, EnvRetryBackoff: s.RetryBackoff,
		EnvPickupTimeout: s.PickupTimeout, EnvOrderDeadline: s.OrderDeadline} {
		if d > 0 {
			env[name] = d.String()
		}
	}
	if s.MaxFailures > 0 {
		env[EnvMaxFailures] = strconv.Itoa(s.MaxFailures)
	}
	return env
}
