package stack_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/infra/stack"
	"github.com/sas-go/sas/shared/topology"
)

// standInAssets is a folder of stand-in function assets, a distinct one
// each, as make build would leave them.
func standInAssets(t *testing.T) string {
	t.Helper()
	assets := t.TempDir()
	for _, fn := range []string{"submission", "scheduler", "agent", "supervisor", "loyalty"} {
		require.NoError(t, os.MkdirAll(filepath.Join(assets, fn), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(assets, fn, "bootstrap"), []byte(fn), 0o755))
	}
	return assets
}

// synthContext synthesizes the stack with context (beside a prefix and
// stand-in assets), as `cdk synth -c key=value` does.
func synthContext(t *testing.T, context map[string]any) map[string]any {
	t.Helper()
	assets := standInAssets(t)
	ctx := map[string]any{"prefix": "shop", "assetDir": assets}
	for k, v := range context {
		ctx[k] = v
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &ctx})
	p, err := stack.Config(app)
	require.NoError(t, err)
	st := stack.New(app, "shop-capacity", p, nil)
	var out map[string]any
	b, _ := json.Marshal(assertions.Template_FromStack(st, nil).ToJSON())
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// concurrencyByQueue is each event source mapping's MaximumConcurrency, by
// the logical id of the queue it reads.
func concurrencyByQueue(tmpl map[string]any) map[string]float64 {
	out := map[string]float64{}
	for _, e := range of(tmpl, "AWS::Lambda::EventSourceMapping") {
		arn := e["EventSourceArn"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		out[arn] = e["ScalingConfig"].(map[string]any)["MaximumConcurrency"].(float64)
	}
	return out
}

// envOf is a function's environment, by the function's logical id prefix.
func envOf(tmpl map[string]any, fn string) map[string]any {
	for id, f := range of(tmpl, "AWS::Lambda::Function") {
		if strings.HasPrefix(id, fn) {
			return f["Environment"].(map[string]any)["Variables"].(map[string]any)
		}
	}
	return nil
}

// ttlOf is each table's TimeToLiveSpecification, by table name.
func ttlOf(tmpl map[string]any) map[string]any {
	out := map[string]any{}
	for _, tb := range of(tmpl, "AWS::DynamoDB::Table") {
		out[tb["TableName"].(string)] = tb["TimeToLiveSpecification"]
	}
	return out
}

// The defaults: Submission and the Scheduler at 50, each Agent at 20, the
// deadline index's 4 shards, the Supervisor's 16 orders at once, ended
// orders kept 90 days by both tables' time to live.
func TestTheCapacitySettingsDefaults(t *testing.T) {
	byQueue := concurrencyByQueue(tmpl)
	require.Len(t, byQueue, 9)
	for q, n := range byQueue {
		want := 50.0
		if strings.Contains(q, "requests") {
			want = 20
		}
		require.Equal(t, want, n, q)
	}
	env := envOf(tmpl, "Supervisor")
	require.Equal(t, "4", env["SAS_DEADLINE_SHARDS"])
	require.Equal(t, "16", env["SAS_SUPERVISOR_PARALLELISM"])
	require.Equal(t, "90", env["SAS_RETENTION_DAYS"])
	for table, ttl := range ttlOf(tmpl) {
		require.Equal(t, map[string]any{"AttributeName": topology.KeyExpires, "Enabled": true}, ttl, table)
	}
}

// Each setting that moves a limit changes the template: the mappings'
// concurrency (an agent's own from its workflow file), the shards a target
// rate needs, the Supervisor's parallelism, the retention (0: kept forever,
// which the functions are told, and the payloads with them).
func TestTheCapacitySettingsChangeTheTemplate(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "protect.yaml")
	require.NoError(t, os.WriteFile(wf, []byte(`name: protect
agents:
  fragile: {endpoint: "https://fragile.example.com", concurrency: 3}
  sturdy: {endpoint: "https://sturdy.example.com"}
steps:
  - {name: one, agent: fragile, timeout: 10s}
  - {name: two, agent: sturdy, timeout: 10s}
`), 0o644))
	got := synthContext(t, map[string]any{"workflows": wf, "submissionConcurrency": "200", "schedulerConcurrency": "300",
		"agentConcurrency": "100", "targetRate": "10000", "supervisorParallelism": "64", "retentionDays": "0"})
	byQueue := concurrencyByQueue(got)
	require.Len(t, byQueue, 7, "orders, events, scheduler, two agents' requests and responses")
	for q, n := range byQueue {
		switch {
		case strings.Contains(q, "fragilerequests"):
			require.Equal(t, 3.0, n, "the workflow file's, for its service")
		case strings.Contains(q, "requests"):
			require.Equal(t, 100.0, n, "context agentConcurrency")
		case strings.Contains(q, "orders"), strings.Contains(q, "events"):
			require.Equal(t, 200.0, n, "context submissionConcurrency")
		default:
			require.Equal(t, 300.0, n, "%s: context schedulerConcurrency", q)
		}
	}
	for _, fn := range []string{"Submission", "Scheduler", "Supervisor", "AgentFragile"} {
		env := envOf(got, fn)
		require.Equal(t, "40", env["SAS_DEADLINE_SHARDS"], "%s: 10,000 orders a second over 250 a shard", fn)
		require.Equal(t, "0", env["SAS_RETENTION_DAYS"], "%s: kept forever", fn)
	}
	require.Equal(t, "64", envOf(got, "Supervisor")["SAS_SUPERVISOR_PARALLELISM"])
	require.Equal(t, map[string]any{"Id": "payloads", "Status": "Enabled",
		"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1.0}}, payloadRule(t, got),
		"orders kept forever keep their payloads: no expiry")

	got = synthContext(t, map[string]any{"deadlineShards": "12", "retentionDays": "30"})
	require.Equal(t, "12", envOf(got, "Scheduler")["SAS_DEADLINE_SHARDS"])
	require.Equal(t, "30", envOf(got, "Scheduler")["SAS_RETENTION_DAYS"])
}

// A bad value fails the synth, naming its key.
func TestTheCapacitySettingsRefuseBadValues(t *testing.T) {
	for key, bad := range map[string]struct{ value, want string }{
		"submissionConcurrency": {"1", `context submissionConcurrency="1": must be from 2 to 1000, not 1`},
		"schedulerConcurrency":  {"1001", `context schedulerConcurrency="1001": must be from 2 to 1000, not 1001`},
		"agentConcurrency":      {"lots", `context agentConcurrency="lots": "lots" is not a whole number`},
		"deadlineShards":        {"0", `context deadlineShards="0": must be from 1 to 256, not 0`},
		"targetRate":            {"100000", `context targetRate="100000": must be from 0 to 64000, not 100000`},
		"supervisorParallelism": {"0", `context supervisorParallelism="0": must be from 1 to 256, not 0`},
		"retentionDays":         {"-1", `context retentionDays="-1": must not be negative`},
	} {
		_, err := stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{key: bad.value}}))
		require.ErrorContains(t, err, bad.want, key)
	}
	_, err := stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"targetRate": "5000", "deadlineShards": "4"}}))
	require.ErrorContains(t, err, "context targetRate=5000 and deadlineShards=4: set one")
}

// Context tracing=otlp traces every function: the ADOT collector layer
// (context adotLayerArn) beside its own, X-Ray active tracing, the right to
// send segments (on *, which X-Ray's actions take: cdk-nag stays clean),
// and SAS_TRACING for shared/tracing; without it (the shared template),
// none of that. tracing=otlp needs the layer (or otlpEndpoint); a bad
// value is refused.
func TestTracingTurnsOnInEveryFunction(t *testing.T) {
	const layer = "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-102-1:1"
	traced, notes, _ := synthKMS(t, "", map[string]any{"tracing": "otlp", "adotLayerArn": layer})
	requireNagClean(t, notes)
	fns := of(traced, "AWS::Lambda::Function")
	require.NotEmpty(t, fns)
	for id, f := range fns {
		require.Equal(t, map[string]any{"Mode": "Active"}, f["TracingConfig"], id)
		require.Contains(t, f["Layers"], layer, id)
		require.Equal(t, "otlp", f["Environment"].(map[string]any)["Variables"].(map[string]any)["SAS_TRACING"], id)
	}
	b, _ := json.Marshal(of(traced, "AWS::IAM::Policy"))
	require.Contains(t, string(b), "xray:PutTraceSegments")

	plain := tmpl // TestMain's
	for id, f := range of(plain, "AWS::Lambda::Function") {
		require.Nil(t, f["TracingConfig"], id)
		require.NotContains(t, f["Environment"].(map[string]any)["Variables"], "SAS_TRACING", id)
	}
	b, _ = json.Marshal(of(plain, "AWS::IAM::Policy"))
	require.NotContains(t, string(b), "xray:")

	// A collector of one's own (otlpEndpoint): its URL in every function's
	// environment, its headers secret read by the functions (its name in the
	// template, never its value), no layer and no X-Ray.
	own := synthContext(t, map[string]any{"otlpEndpoint": "https://api.honeycomb.io", "otlpHeadersSecret": "sas/honeycomb"})
	for id, f := range of(own, "AWS::Lambda::Function") {
		vars := f["Environment"].(map[string]any)["Variables"].(map[string]any)
		require.Equal(t, "https://api.honeycomb.io", vars["OTEL_EXPORTER_OTLP_ENDPOINT"], id)
		require.Equal(t, "sas/honeycomb", vars["SAS_OTLP_HEADERS_SECRET"], id)
		require.Nil(t, f["TracingConfig"], id)
		require.Nil(t, f["Layers"], id)
	}
	b, _ = json.Marshal(of(own, "AWS::IAM::Policy"))
	require.Contains(t, string(b), "secret:sas/honeycomb-??????")

	_, err := stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"tracing": "otlp"}}))
	require.ErrorContains(t, err, "context tracing=otlp needs adotLayerArn")
	_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"otlpHeadersSecret": "k"}}))
	require.ErrorContains(t, err, "set otlpEndpoint too")
	_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"tracing": "xray"}}))
	require.ErrorContains(t, err, `"xray" is not otlp or off`)
}
