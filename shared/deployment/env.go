package deployment

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

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
	// EnvSupervisorParallelism bounds the orders the Supervisor handles at
	// once.
	EnvSupervisorParallelism = "SAS_SUPERVISOR_PARALLELISM"
	// EnvCensusEvery is how often the Supervisor's census of the versions
	// in flight begins (Go duration; default hourly).
	EnvCensusEvery = "SAS_CENSUS_EVERY"
	// EnvRetentionDays is how long an ended order is kept (0: forever).
	EnvRetentionDays = "SAS_RETENTION_DAYS"
	// EnvPayloadBucket is the bucket that keeps payloads too large to travel
	// inline (shared/payload); unset: none, and payloads are inline only.
	EnvPayloadBucket = "SAS_PAYLOAD_BUCKET"
	// EnvPayloadInlineBytes is the largest payload kept inline in a message
	// or an item; a larger one goes to the payload bucket.
	EnvPayloadInlineBytes = "SAS_PAYLOAD_INLINE_BYTES"
	// EnvDataKey is the stack's KMS key, under which the orders' data keys
	// are made (sealed data, shared/seal); unset: nothing sealed, nothing
	// opened.
	EnvDataKey = "SAS_DATA_KEY"
	// EnvSealData says whether each new order's data is sealed under a
	// data key of its own (true), or only what was sealed before is
	// opened, and what is made of it sealed under its order's data key
	// (false: sealData turned off, the key kept). Unset with EnvDataKey
	// set, as a stack of before sealData could be turned off wrote it: true.
	EnvSealData = "SAS_SEAL_DATA"
)

// FromEnv reads a deployment's configuration (Table's settings with an
// environment variable) and loads its workflow files; unset settings keep
// their defaults. The workflows' ${NAME}s stay as written: an Agent fills
// its own (Deployment.Agent).
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv(EnvPrefix) == "" {
		return Config{}, fmt.Errorf("%s is not set", EnvPrefix)
	}
	c := Config{Settings: DefaultSettings()}
	if err := c.Settings.readEnv(getenv); err != nil {
		return c, err
	}
	if c.DataKey != "" && getenv(EnvSealData) == "" {
		c.SealData = true // a stack's of before: a data key meant sealing
	}
	c.QueueURLBase = strings.TrimSuffix(c.QueueURLBase, "/")
	set, err := LoadWorkflows(c.WorkflowFiles, getenv("LAMBDA_TASK_ROOT"), c.MaxStepTimeout())
	if err != nil {
		return c, err
	}
	c.Workflows = set.With(c.Overrides)
	if len(c.Topology.Agents) == 0 {
		c.Topology.Agents = set.Agents()
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
