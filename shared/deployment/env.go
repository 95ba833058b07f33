package deployment

import (
	"fmt"
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
	EnvAgents        = "SAS_AGENTS"          // comma-separated agent names
	EnvShards        = "SAS_DEADLINE_SHARDS" // partitions of the deadline index
	EnvQueueURLBase  = "SAS_QUEUE_URL_BASE"  // e.g. https://sqs.us-east-1.amazonaws.com/ACCOUNT
	EnvAlertTopicARN = "SAS_ALERT_TOPIC_ARN"
	EnvRemoteBaseURL = "SAS_REMOTE_BASE_URL" // agents: the remote services' base URL
	EnvStepTimeout   = "SAS_STEP_TIMEOUT"    // Go duration, e.g. 30s
	EnvMaxFailures   = "SAS_MAX_FAILURES"
	EnvRetryBackoff  = "SAS_RETRY_BACKOFF"
	EnvPickupTimeout = "SAS_PICKUP_TIMEOUT"
	EnvOrderDeadline = "SAS_ORDER_DEADLINE" // Go duration: an order not ended by then fails
	EnvBacklogDepth  = "SAS_BACKLOG_DEPTH"  // messages waiting that make a queue backlogged (supervisor)
	EnvWorkflow      = "SAS_WORKFLOW"       // "order" (default) or "single"
	// EnvAllowedReplyQueues is a comma-separated list of queue URL prefixes
	// an order's replyQueue may start with (none: no reply queues).
	EnvAllowedReplyQueues = "SAS_ALLOWED_REPLY_QUEUES"
)

// FromEnv reads a deployment's configuration; unset knobs keep their defaults.
func FromEnv(getenv func(string) string) (Config, error) {
	prefix := getenv(EnvPrefix)
	if prefix == "" {
		return Config{}, fmt.Errorf("%s is not set", EnvPrefix)
	}
	agents := workflow.OrderAgents
	if v := getenv(EnvAgents); v != "" {
		agents = strings.Split(v, ",")
	}
	c := Config{
		Topology:      topology.Default(prefix, agents...),
		QueueURLBase:  strings.TrimSuffix(getenv(EnvQueueURLBase), "/"),
		AlertTopicARN: getenv(EnvAlertTopicARN),
		Settings:      workflow.DefaultSettings(),
		RemoteBaseURL: strings.TrimSuffix(getenv(EnvRemoteBaseURL), "/"),
		BacklogDepth:  supervisor.DefaultBacklogDepth,
	}
	if v := getenv(EnvAllowedReplyQueues); v != "" {
		c.AllowedReplyQueues = strings.Split(v, ",")
	}
	c.Settings.Workflow = getenv(EnvWorkflow)
	var err error
	if v := getenv(EnvShards); v != "" {
		if c.Topology.DeadlineShards, err = strconv.Atoi(v); err != nil {
			return c, fmt.Errorf("%s=%q: %w", EnvShards, v, err)
		}
	}
	for name, dst := range map[string]*time.Duration{EnvStepTimeout: &c.Settings.StepTimeout,
		EnvRetryBackoff: &c.Settings.RetryBackoff, EnvPickupTimeout: &c.Settings.PickupTimeout,
		EnvOrderDeadline: &c.Settings.OrderDeadline} {
		if v := getenv(name); v != "" {
			if *dst, err = time.ParseDuration(v); err != nil {
				return c, fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	}
	for name, dst := range map[string]*int{EnvMaxFailures: &c.Settings.MaxFailures, EnvBacklogDepth: &c.BacklogDepth} {
		if v := getenv(name); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil {
				return c, fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	}
	return c, c.Validate()
}

// Env is the inverse of FromEnv: the variables that describe c.
func (c Config) Env() map[string]string {
	env := map[string]string{
		EnvPrefix: c.Topology.Prefix, EnvAgents: strings.Join(c.Topology.Agents, ","),
		EnvShards: strconv.Itoa(c.Topology.DeadlineShards), EnvQueueURLBase: c.QueueURLBase,
		EnvAlertTopicARN: c.AlertTopicARN, EnvRemoteBaseURL: c.RemoteBaseURL,
		EnvStepTimeout: c.Settings.StepTimeout.String(), EnvMaxFailures: strconv.Itoa(c.Settings.MaxFailures),
		EnvRetryBackoff: c.Settings.RetryBackoff.String(), EnvPickupTimeout: c.Settings.PickupTimeout.String(),
		EnvOrderDeadline: c.Settings.OrderDeadline.String(), EnvBacklogDepth: strconv.Itoa(c.BacklogDepth),
		EnvAllowedReplyQueues: strings.Join(c.AllowedReplyQueues, ","),
	}
	if c.Settings.Workflow != "" {
		env[EnvWorkflow] = c.Settings.Workflow
	}
	return env
}
