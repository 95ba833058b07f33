// Package stack is the CDK stack (v2, Go) that deploys the pipeline: tables,
// queues with their DLQs, the functions and their event sources, the
// Supervisor's schedule, alert and alarm topics, alarms and a dashboard, with
// least-privilege roles. It reads the same resource description as the local
// stack, shared/topology, so the two cannot drift.
package stack

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Props configure the stack; Config reads them from CDK context.
type Props struct {
	Topology topology.Topology
	// WorkflowFiles are the workflow files deployed (none: the example order
	// workflow, built into the functions); Workflows are the workflows they
	// hold, with Settings' overrides.
	WorkflowFiles []string
	Workflows     workflow.Set
	Settings      workflow.Settings
	// AgentVars are the values of each agent's ${NAME}s, read at synth,
	// by agent: its function's environment has them.
	AgentVars map[string]map[string]string
	// Agents are the agents' declarations with their ${NAME}s filled.
	Agents map[string]workflow.Agent
	// SupervisorRate is how often the Supervisor runs (whole minutes).
	SupervisorRate time.Duration
	// AlarmEmail, if set, is subscribed to the alarm and alert topics.
	AlarmEmail string
	// ReplyQueuePrefixes are the queue-name prefixes orders may name as their
	// reply queue (in this account and region); none: no reply queues.
	ReplyQueuePrefixes []string
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
	CtxWorkflows          = "workflows"
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
	p := Props{
		Topology:           topology.Default(prefix),
		SupervisorRate:     time.Minute,
		AlarmEmail:         get(CtxAlarmEmail),
		AssetDir:           get(CtxAssetDir),
		OldestMessageAlarm: 5 * time.Minute,
		QueueWaitAlarm:     5 * time.Minute,
		BacklogDepth:       supervisor.DefaultBacklogDepth,
	}
	if p.AssetDir == "" {
		p.AssetDir = "build"
	}
	if v := get(CtxReplyQueuePrefixes); v != "" {
		p.ReplyQueuePrefixes = strings.Split(v, ",")
	}
	if err := p.readKnobs(get); err != nil {
		return p, err
	}
	if err := p.loadWorkflows(get(CtxWorkflows), get(CtxRemoteBaseURL), os.Getenv); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// readKnobs reads the context's durations and numbers into p.
func (p *Props) readKnobs(get func(string) string) error {
	var err error
	for k, dst := range map[string]*time.Duration{CtxStepTimeout: &p.Settings.StepTimeout,
		CtxRetryBackoff: &p.Settings.RetryBackoff, CtxPickupTimeout: &p.Settings.PickupTimeout,
		CtxOrderDeadline: &p.Settings.OrderDeadline, CtxQueueWaitAlarm: &p.QueueWaitAlarm} {
		if v := get(k); v != "" {
			if *dst, err = time.ParseDuration(v); err != nil {
				return fmt.Errorf("context %s=%q: %w", k, v, err)
			}
		}
	}
	for k, dst := range map[string]*int{CtxMaxFailures: &p.Settings.MaxFailures, CtxBacklogDepth: &p.BacklogDepth} {
		if v := get(k); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil {
				return fmt.Errorf("context %s=%q: %w", k, v, err)
			}
		}
	}
	if v := get(CtxBatchWindow); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("context %s=%q: a whole number of seconds, 0 to 300", CtxBatchWindow, v)
		}
		p.Topology.BatchWindow = time.Duration(n) * time.Second // Validate checks the range
	}
	if v := get(CtxSupervisorRate); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("context %s=%q: a whole number of minutes, at least 1", CtxSupervisorRate, v)
		}
		p.SupervisorRate = time.Duration(n) * time.Minute
	}
	return nil
}

// loadWorkflows loads the workflow files (comma-separated; none: the
// example order workflow) and reads each agent's ${NAME}s: remoteBase fills
// ${SAS_REMOTE_BASE_URL}, the synth's environment the others. A name not set
// is an error here, not at the function's cold start.
func (p *Props) loadWorkflows(files, remoteBase string, getenv func(string) string) error {
	if files != "" {
		p.WorkflowFiles = strings.Split(files, ",")
	}
	set, err := deployment.LoadWorkflows(p.WorkflowFiles, "", p.Topology.FunctionTimeout-deployment.StepTimeoutMargin)
	if err != nil {
		return fmt.Errorf("context %s:\n%w", CtxWorkflows, err)
	}
	p.Workflows = set.With(p.Settings)
	p.Topology.Agents = set.Agents()
	lookup := func(name string) string {
		switch {
		case name == deployment.EnvRemoteBaseURL:
			return cmp.Or(remoteBase, getenv(name), "https://remote.example.invalid")
		case lambdaSets[name]: // the function's own, whatever the synth's
			return cmp.Or(getenv(name), "${AWS::Region}")
		}
		return getenv(name)
	}
	resolved, err := p.Workflows.Resolve(lookup)
	if err != nil {
		return fmt.Errorf("workflow files need these set when you synth (context %s fills ${%s}):\n%w",
			CtxRemoteBaseURL, deployment.EnvRemoteBaseURL, err)
	}
	p.AgentVars, p.Agents = map[string]map[string]string{}, map[string]workflow.Agent{}
	for _, name := range p.Topology.Agents {
		p.Agents[name], _ = resolved.Agent(name)
		if err := checkSigV4(p.Agents[name]); err != nil {
			return fmt.Errorf("context %s: %w", CtxWorkflows, err)
		}
		a, _ := p.Workflows.Agent(name)
		vars := map[string]string{}
		for _, v := range a.Vars() {
			if !lambdaSets[v] {
				vars[v] = lookup(v)
			}
		}
		p.AgentVars[name] = vars
	}
	return nil
}

// lambdaSets are the variables Lambda sets in every function (and refuses
// to be given).
var lambdaSets = map[string]bool{"AWS_REGION": true, "AWS_DEFAULT_REGION": true}

// Validate checks the props make a deployable stack.
func (p Props) Validate() error {
	if err := p.Topology.Validate(); err != nil {
		return err
	}
	if err := p.Settings.Validate(); err != nil {
		return err
	}
	if err := p.Workflows.Validate(p.Topology.Agents); err != nil {
		return err
	}
	if err := deployment.CheckStepTimeouts(p.Workflows, p.Topology.FunctionTimeout); err != nil {
		return fmt.Errorf("%w (context %s overrides every step's)", err, CtxStepTimeout)
	}
	if err := deployment.CheckPickupTimeouts(p.Workflows, p.Topology.BatchWindow); err != nil {
		return fmt.Errorf("%w (context %s, %s)", err, CtxPickupTimeout, CtxBatchWindow)
	}
	if err := checkReplyQueuePrefixes(p.ReplyQueuePrefixes); err != nil {
		return err
	}
	if err := checkBaseNames(p.WorkflowFiles); err != nil {
		return err
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

// checkReplyQueuePrefixes refuses a reply queue prefix that is not the
// start of a queue name: the IAM grant and the functions' check both take it
// as one.
func checkReplyQueuePrefixes(prefixes []string) error {
	for _, p := range prefixes {
		if !queueNamePrefix.MatchString(p) {
			return fmt.Errorf("context %s: %q is not the start of a queue name (1-79 letters, digits, - or _)", CtxReplyQueuePrefixes, p)
		}
	}
	return nil
}

var queueNamePrefix = regexp.MustCompile(`^[A-Za-z0-9_-]{1,79}$`)

// checkBaseNames refuses two workflow files of one name: the functions
// find them by name, in one folder.
func checkBaseNames(files []string) error {
	seen := map[string]string{}
	for _, f := range files {
		b := filepath.Base(f)
		if o, ok := seen[b]; ok {
			return fmt.Errorf("context %s: %s and %s have the same file name", CtxWorkflows, o, f)
		}
		seen[b] = f
	}
	return nil
}
