package stack_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/topology"
)

// The CDK CLI and cdklocal, pinned; installed into .cdk (a folder Go skips).
const cdkPackages = "aws-cdk@2.1148.1 aws-cdk-local@3.0.4"

// TestDeploySmoke deploys the synthesized stack into moto with cdklocal and
// checks that what each deployed function is configured with names the
// deployed queues, tables and topic, and that each queue feeds the function
// the topology says consumes it.
func TestDeploySmoke(t *testing.T) {
	ctx := context.Background()
	root, _ := filepath.Abs("../..")
	cdklocal := filepath.Join(root, ".cdk", "node_modules", ".bin", "cdklocal")
	if _, err := os.Stat(cdklocal); err != nil {
		out, err := exec.Command("npm", append([]string{"install", "--prefix", filepath.Join(root, ".cdk"),
			"--no-audit", "--no-fund", "--loglevel=error"}, strings.Fields(cdkPackages)...)...).CombinedOutput()
		require.NoError(t, err, "npm install %s:\n%s", cdkPackages, out)
	}
	moto, err := emulatortest.Moto(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = moto.Stop() })
	u, _ := url.Parse(moto.Endpoint)
	endpoint := "http://localhost:" + u.Port() // cdklocal's S3 uploads want a host name
	env := append(os.Environ(), "AWS_ENDPOINT_URL="+endpoint, "AWS_ENDPOINT_URL_S3="+endpoint,
		"AWS_S3_FORCE_PATH_STYLE=true", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1", "CDK_DISABLE_CLI_TELEMETRY=true")
	for _, args := range [][]string{
		{"bootstrap", "aws://123456789012/us-east-1"},
		{"deploy", "--app", filepath.Dir(tmplPath), "--require-approval", "never", "--progress", "events"},
	} {
		cmd := exec.CommandContext(ctx, cdklocal, args...)
		cmd.Env, cmd.Dir = env, root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "cdklocal %s:\n%s", args[0], out)
	}

	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: moto.Endpoint, Emulated: true})
	require.NoError(t, err)
	lc := lambda.NewFromConfig(c.Config)
	fns, err := lc.ListFunctions(ctx, &lambda.ListFunctionsInput{})
	require.NoError(t, err)
	require.Len(t, fns.Functions, 6)
	arnToFn := map[string]string{}
	for _, f := range fns.Functions {
		vars := f.Environment.Variables
		topo := topology.Default(vars["SAS_PREFIX"], strings.Split(vars["SAS_AGENTS"], ",")...)
		for _, q := range topo.Queues() {
			for _, name := range []string{q.Name, q.DLQName} {
				_, err := c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
				require.NoError(t, err, "%s is configured with queue %s", aws.ToString(f.FunctionName), name)
			}
		}
		for _, table := range []string{topo.OrdersTable(), topo.StateTable()} {
			_, err := c.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
			require.NoError(t, err, "table %s", table)
		}
		topics, err := c.SNS.ListTopics(ctx, &sns.ListTopicsInput{})
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(topics.Topics, func(tp snsTopic) bool {
			return strings.HasSuffix(aws.ToString(tp.TopicArn), ":"+topo.AlertTopic())
		}), "topic %s", topo.AlertTopic())
		arnToFn[aws.ToString(f.FunctionArn)] = functionRole(aws.ToString(f.FunctionName), vars["SAS_AGENT_NAME"])
	}

	esms, err := lc.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{})
	require.NoError(t, err)
	require.Len(t, esms.EventSourceMappings, 9)
	topo := props.Topology
	for _, m := range esms.EventSourceMappings {
		queue := aws.ToString(m.EventSourceArn)[strings.LastIndex(aws.ToString(m.EventSourceArn), ":")+1:]
		consumer := arnToFn[aws.ToString(m.FunctionArn)]
		var want string
		for _, q := range topo.Queues() {
			if q.Name == queue {
				want = string(q.Consumer)
				if q.Consumer == topology.Agent {
					want += "-" + q.Agent
				}
			}
		}
		require.NotEmpty(t, want, "mapping from an unknown queue %s", queue)
		require.Equal(t, want, consumer, "queue %s feeds the function the topology names", queue)
	}
}

type snsTopic = snstypes.Topic

// functionRole names a deployed function by what it is: submission,
// scheduler, supervisor, agent-<name>.
func functionRole(name, agent string) string {
	for _, r := range []string{"Submission", "Scheduler", "Supervisor"} {
		if strings.Contains(name, "-"+r) {
			return strings.ToLower(r)
		}
	}
	return fmt.Sprintf("agent-%s", agent)
}
