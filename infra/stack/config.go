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
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/workflow"
)

// Props configure the stack; Config reads them from CDK context.
type Props struct {
	// Settings are the deployment's (deployment.Table): the prefix, the
	// workflow files, their overrides, the Supervisor's rate, the alarms',
	// the reply queues, the asset folder.
	deployment.Settings
	// Workflows are the workflows the files hold (none: the example order
	// workflow, built into the functions), with the settings' overrides.
	Workflows workflow.Set
	// AgentVars are the values of each agent's ${NAME}s, read at synth,
	// by agent: its function's environment has them.
	AgentVars map[string]map[string]string
	// Agents are the agents' declarations with their ${NAME}s filled.
	Agents map[string]workflow.Agent
	// OldestMessageAlarm is the age of a work queue's oldest message that alarms.
	OldestMessageAlarm time.Duration
}

// renamed are context keys of earlier versions, with what replaced them.
var renamed = map[string]string{"supervisorRateMinutes": "supervisorRate (a duration such as 5m)"}

// Config reads the props from the app's context (cdk.json or -c key=value):
// each setting of deployment.Table with a context key, over its default.
func Config(app awscdk.App) (Props, error) {
	get := func(k string) string {
		v := app.Node().TryGetContext(&k)
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	for old, now := range renamed {
		if get(old) != "" {
			return Props{}, fmt.Errorf("context %s is now %s", old, now)
		}
	}
	s, err := deployment.FromContext(get)
	if err != nil {
		return Props{}, err
	}
	p := Props{Settings: s, OldestMessageAlarm: 5 * time.Minute}
	if err := p.loadWorkflows(os.Getenv); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// loadWorkflows loads the workflow files (none: the example order
// workflow) and reads each agent's ${NAME}s: remoteBaseUrl fills
// ${SAS_REMOTE_BASE_URL}, the synth's environment the others. A name not set
// is an error here, not at the function's cold start.
func (p *Props) loadWorkflows(getenv func(string) string) error {
	set, err := deployment.LoadWorkflows(p.WorkflowFiles, "", p.MaxStepTimeout())
	if err != nil {
		return fmt.Errorf("context workflows:\n%w", err)
	}
	p.Workflows = set.With(p.Overrides)
	p.Topology.Agents = set.Agents()
	lookup := func(name string) string {
		switch {
		case name == deployment.EnvRemoteBaseURL:
			return cmp.Or(p.RemoteBaseURL, getenv(name), "https://remote.example.invalid")
		case lambdaSets[name]: // the function's own, whatever the synth's
			return cmp.Or(getenv(name), "${AWS::Region}")
		}
		return getenv(name)
	}
	resolved, err := p.Workflows.Resolve(lookup)
	if err != nil {
		return fmt.Errorf("workflow files need these set when you synth (context remoteBaseUrl fills ${%s}):\n%w",
			deployment.EnvRemoteBaseURL, err)
	}
	p.AgentVars, p.Agents = map[string]map[string]string{}, map[string]workflow.Agent{}
	for _, name := range p.Topology.Agents {
		p.Agents[name], _ = resolved.Agent(name)
		if err := checkSigV4(p.Agents[name]); err != nil {
			return fmt.Errorf("context workflows: %w", err)
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

// Validate checks the props make a deployable stack: the settings
// together, and what a deployed stack needs beyond a local one.
func (p Props) Validate() error {
	if err := p.Settings.Validate(); err != nil {
		return err
	}
	if err := p.Workflows.Validate(p.Topology.Agents); err != nil {
		return err
	}
	if err := deployment.CheckStepTimeouts(p.Workflows, p.Topology.FunctionTimeout); err != nil {
		return fmt.Errorf("%w (context stepTimeout overrides every step's)", err)
	}
	if err := deployment.CheckPickupTimeouts(p.Workflows, p.Topology.BatchWindow); err != nil {
		return fmt.Errorf("%w (context pickupTimeout, batchWindowSeconds)", err)
	}
	if err := deployment.CheckDeadlines(p.Workflows); err != nil {
		return fmt.Errorf("%w (context orderDeadline overrides every workflow's)", err)
	}
	if err := p.Network.Validate(p.Topology.Agents); err != nil {
		return err
	}
	if err := checkBaseNames(p.WorkflowFiles); err != nil {
		return err
	}
	if p.Tracing == "otlp" && p.ADOTLayerARN == "" && p.OTLPEndpoint == "" {
		return fmt.Errorf("context tracing=otlp needs adotLayerArn (the AWS Distro for OpenTelemetry collector layer, arm64, of your region: X-Ray) or otlpEndpoint (a collector of your own)")
	}
	if p.OTLPHeadersSecret != "" && p.OTLPEndpoint == "" {
		return fmt.Errorf("context otlpHeadersSecret is the headers of otlpEndpoint's collector: set otlpEndpoint too")
	}
	if p.SealData && p.KMS == "" {
		return fmt.Errorf("context sealData=true needs context kms (create, or your key's ARN): each order's data key is made under that key")
	}
	if p.SupervisorRate < time.Minute || p.SupervisorRate%time.Minute != 0 {
		return fmt.Errorf("context supervisorRate=%s: an EventBridge schedule is whole minutes, at least 1m",
			deployment.ShortDuration(p.SupervisorRate))
	}
	return nil
}

// checkBaseNames refuses two workflow files of one name: the functions
// find them by name, in one folder.
func checkBaseNames(files []string) error {
	seen := map[string]string{}
	for _, f := range files {
		b := filepath.Base(f)
		if o, ok := seen[b]; ok {
			return fmt.Errorf("context workflows: %s and %s have the same file name", o, f)
		}
		seen[b] = f
	}
	return nil
}
