// Package stack is the CDK stack (v2, Go) that deploys the pipeline: tables,
// queues with their DLQs, the functions and their event sources, the
// Supervisor's schedule, alert and alarm topics, alarms and a dashboard, with
// least-privilege roles. It reads the same resource description as the local
// stack, shared/topology, so the two cannot drift.
package stack

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Props configure the stack; Config reads them from CDK context.
type Props struct {
	Topology topology.Topology
	Settings workflow.Settings
	// SupervisorRate is how often the Supervisor runs (whole minutes).
	SupervisorRate time.Duration
	// AlarmEmail, if set, is subscribed to the alarm and alert topics.
	AlarmEmail string
	// ReplyQueuePrefixes are the queue-name prefixes orders may name as their
	// reply queue (in this account and region); none: no reply queues.
	ReplyQueuePrefixes []string
	// RemoteBaseURL is the remote services' base URL the Agents call.
	RemoteBaseURL string
	// AssetDir holds build/<function>/bootstrap (make build).
	AssetDir string
	// OldestMessageAlarm is the age of a work queue's oldest message that alarms.
	OldestMessageAlarm time.Duration
	// QueueWaitAlarm is the queue wait (a step ready to claimed) that alarms.
	QueueWaitAlarm time.Duration
	// BacklogDepth is how many messages waiting make a queue backlogged for
	// the Supervisor (deployment.Config.BacklogDepth).
	BacklogDepth int
}

// The context keys, with their defaults in Config.
const (
	CtxPrefix             = "prefix"
	CtxWorkflow           = "workflow"
	CtxStepTimeout        = "stepTimeout"
	CtxMaxFailures        = "maxFailures"
	CtxRetryBackoff       = "retryBackoff"
	CtxPickupTimeout      = "pickupTimeout"
	CtxOrderDeadline      = "orderDeadline"
	CtxBacklogDepth       = "backlogDepth"
	CtxQueueWaitAlarm     = "queueWaitAlarm"
	CtxSupervisorRate     = "supervisorRateMinutes"
	CtxAlarmEmail         = "alarmEmail"
	CtxReplyQueuePrefixes = "allowedReplyQueuePrefixes"
	CtxRemoteBaseURL      = "remoteBaseUrl"
	CtxAssetDir           = "assetDir"
	CtxBatchWindow        = "batchWindowSeconds"
)

// Config reads the props from the app's context (cdk.json or -c key=value).
func Config(app awscdk.App) (Props, error) {
	get := func(k string) string {
		v := app.Node().TryGetContext(&k)
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	prefix := get(CtxPrefix)
	if prefix == "" {
		prefix = "sas"
	}
	settings := workflow.DefaultSettings()
	settings.Workflow = get(CtxWorkflow)
	def, err := workflow.For(settings)
	if err != nil {
		return Props{}, fmt.Errorf("context %s: %w", CtxWorkflow, err)
	}
	p := Props{
		Topology:           topology.Default(prefix, def.Agents()...),
		Settings:           settings,
		SupervisorRate:     time.Minute,
		AlarmEmail:         get(CtxAlarmEmail),
		RemoteBaseURL:      get(CtxRemoteBaseURL),
		AssetDir:           get(CtxAssetDir),
		OldestMessageAlarm: 5 * time.Minute,
		QueueWaitAlarm:     5 * time.Minute,
		BacklogDepth:       supervisor.DefaultBacklogDepth,
	}
	if p.RemoteBaseURL == "" {
		p.RemoteBaseURL = "https://remote.example.invalid"
	}
	if p.AssetDir == "" {
		p.AssetDir = "build"
	}
	if v := get(CtxReplyQueuePrefixes); v != "" {
		p.ReplyQueuePrefixes = strings.Split(v, ",")
	}
	for k, dst := range map[string]*time.Duration{CtxStepTimeout: &p.Settings.StepTimeout,
		CtxRetryBackoff: &p.Settings.RetryBackoff, CtxPickupTimeout: &p.Settings.PickupTimeout,
		CtxOrderDeadline: &p.Settings.OrderDeadline, CtxQueueWaitAlarm: &p.QueueWaitAlarm} {
		if v := get(k); v != "" {
			if *dst, err = time.ParseDuration(v); err != nil {
				return p, fmt.Errorf("context %s=%q: %w", k, v, err)
			}
		}
	}
	for k, dst := range map[string]*int{CtxMaxFailures: &p.Settings.MaxFailures, CtxBacklogDepth: &p.BacklogDepth} {
		if v := get(k); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil {
				return p, fmt.Errorf("context %s=%q: %w", k, v, err)
			}
		}
	}
	if v := get(CtxBatchWindow); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return p, fmt.Errorf("context %s=%q: a whole number of seconds, 0 to 300", CtxBatchWindow, v)
		}
		p.Topology.BatchWindow = time.Duration(n) * time.Second // Validate checks the range
	}
	if v := get(CtxSupervisorRate); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, fmt.Errorf("context %s=%q: a whole number of minutes, at least 1", CtxSupervisorRate, v)
		}
		p.SupervisorRate = time.Duration(n) * time.Minute
	}
	return p, p.Validate()
}

// Validate checks the props make a deployable stack.
func (p Props) Validate() error {
	if err := p.Topology.Validate(); err != nil {
		return err
	}
	def, err := workflow.For(p.Settings)
	if err != nil {
		return err
	}
	if err := def.Validate(p.Topology.Agents); err != nil {
		return err
	}
	if p.Settings.StepTimeout > p.Topology.FunctionTimeout-5*time.Second {
		return fmt.Errorf("stepTimeout %s must leave the agents' %s function timeout 5s to reply",
			p.Settings.StepTimeout, p.Topology.FunctionTimeout)
	}
	if p.SupervisorRate < time.Minute || p.SupervisorRate%time.Minute != 0 {
		return fmt.Errorf("the supervisor's rate must be whole minutes, not %s", p.SupervisorRate)
	}
	if p.BacklogDepth < 1 {
		return fmt.Errorf("backlogDepth must be at least 1 message, not %d", p.BacklogDepth)
	}
	if p.QueueWaitAlarm < time.Minute {
		return fmt.Errorf("queueWaitAlarm must be at least 1m, not %s", p.QueueWaitAlarm)
	}
	return nil
}
