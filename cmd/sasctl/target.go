package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
)

// target is the deployment a command acts on: its prefix, its agents (if
// given), and the endpoint that reaches it (if not the SDK's own).
type target struct {
	settingFlags
	endpoint string
	output   output
	flags    *pflag.FlagSet
}

// targetFlags puts the flags that name a deployment on cmd (and --output,
// if it prints a result).
func targetFlags(cmd *cobra.Command, t *target, prints bool) {
	t.Settings = deployment.DefaultSettings()
	t.flags = cmd.Flags()
	cmd.Flags().StringVar(&t.endpoint, "endpoint", "",
		"the endpoint of every AWS service (an emulator); default the SDK's own settings: AWS_ENDPOINT_URL, else AWS")
	t.bind(cmd.Flags(), "prefix", "agents", "deadlineShards", "retentionDays", "payloadBucket")
	if f := cmd.Flags().Lookup("retention-days"); f != nil && !t.told("retentionDays") {
		// Its default is the deployment's; left unset, a command is not
		// told, and sets no expiry sooner than the deployment would.
		f.DefValue, f.Usage = "", f.Usage+"; unset: not told (sasctl gives an order stored before orders kept theirs no expiry sooner than its deployment would)"
	}
	cmd.PreRunE = t.check
	if prints {
		outputFlag(cmd, &t.output)
	}
}

// connect builds the operator for the deployment; with findAgents, it reads
// the deployment's agents from its queues if --agents did not name them
// (the queue names of watch, redrive and the console need them).
func (t *target) connect(ctx context.Context, findAgents bool) (*operator.Operator, error) {
	emulated := t.endpoint != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: t.endpoint, Emulated: emulated})
	if err != nil {
		return nil, err
	}
	if c.Config.Region == "" {
		return nil, usageErrorf("no AWS region: set AWS_REGION, or use a profile that has one (AWS_PROFILE)")
	}
	prefix := t.Topology.Prefix
	topo := topology.Default(prefix, t.Topology.Agents...)
	topo.DeadlineShards = t.Topology.DeadlineShards // every shard of a deployment that has more
	op := operator.New(c, topo)
	if !emulated {
		// The ends its writes make (a cancel, an undo, a skip) count in
		// the stack's dashboard and alarms, as a function's do. An
		// emulator has no CloudWatch the SDK speaks to: there, they are
		// in the hourly counts (top, the console) only.
		op.ToCloudWatch(c.Config)
	}
	if t.told("retentionDays") { // for an order stored before orders kept theirs; not told, none is set
		op.WithRetention(t.Retention())
	}
	// The local stack's bucket against an emulator; on AWS the stack's has
	// a name CloudFormation makes, which --payload-bucket tells: without
	// it, what needs the bucket says so (an order's own claim checks name
	// its bucket, which its payloads' writes use).
	op.PayloadBucket = t.PayloadBucket
	if op.PayloadBucket == "" && emulated {
		op.PayloadBucket = topo.PayloadBucket()
	}
	if !findAgents || len(op.Topology.Agents) > 0 {
		return op, nil
	}
	if op.Topology.Agents, err = op.FindAgents(ctx); err != nil {
		return nil, t.explain(err)
	}
	if len(op.Topology.Agents) == 0 {
		return nil, fmt.Errorf("no deployment %q at this endpoint: no queue is named %s-agent-… (check --prefix and --endpoint, "+
			"or start one with make dev)", prefix, prefix)
	}
	return op, nil
}

// explain says what an error from the deployment means: a missing queue or
// table is a deployment that is not there.
func (t *target) explain(err error) error {
	var noQueue *sqstypes.QueueDoesNotExist
	var noTable *types.ResourceNotFoundException
	if errors.As(err, &noQueue) || errors.As(err, &noTable) || strings.Contains(err.Error(), "NonExistentQueue") {
		return fmt.Errorf("no deployment %q at this endpoint (check --prefix and --endpoint, or start one with make dev): %w",
			t.Topology.Prefix, err)
	}
	return err
}

// explainOrder is explain for an error about an order, which may not exist.
func (t *target) explainOrder(id string, err error) error {
	if errors.Is(err, statestore.ErrNotFound) {
		return fmt.Errorf("order %s not found", id)
	}
	return t.explain(err)
}

// told reports whether the setting was given, by its flag or its
// environment variable, rather than left at its default.
func (t *target) told(setting string) bool {
	st, ok := deployment.Lookup(setting)
	if !ok {
		return false
	}
	return (st.Env != "" && os.Getenv(st.Env) != "") || (t.flags != nil && t.flags.Changed(st.Flag))
}
