package deployment_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/workflow"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func base() map[string]string {
	return map[string]string{deployment.EnvPrefix: "p", deployment.EnvQueueURLBase: "u", deployment.EnvAlertTopicARN: "a"}
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestFromEnvDefaultsAndRoundTrip(t *testing.T) {
	t.Parallel()
	c, err := deployment.FromEnv(env(map[string]string{
		deployment.EnvPrefix: "shop", deployment.EnvQueueURLBase: "https://sqs.example/123/",
		deployment.EnvAlertTopicARN: "arn:aws:sns:us-east-1:000000000000:shop-alerts",
		deployment.EnvStepTimeout:   "15s", deployment.EnvMaxFailures: "4",
	}))
	require.NoError(t, err)
	order := c.Workflows.Default()
	require.Equal(t, "order", order.Name, "the example order workflow when no file is named")
	require.Equal(t, 15*time.Second, order.Steps[1].Timeout, "overridden")
	require.Equal(t, 4, order.Steps[0].Undo.MaxFailures)
	require.Equal(t, time.Minute, order.PickupTimeout, "as the file says")
	require.Equal(t, []string{"inventory", "payment", "shipping"}, c.Topology.Agents, "the workflows' agents")
	require.Equal(t, "https://sqs.example/123/shop-scheduler", c.QueueURL(c.Topology.SchedulerQueue().Name))
	back, err := deployment.FromEnv(env(c.Env()))
	require.NoError(t, err)
	require.Equal(t, c, back)
}

func TestFromEnvSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	_, err := deployment.FromEnv(env(nil))
	require.ErrorContains(t, err, "SAS_PREFIX is not set")
	for k, v := range map[string]string{deployment.EnvStepTimeout: "soon", deployment.EnvMaxFailures: "three",
		deployment.EnvShards: "x"} {
		_, err := deployment.FromEnv(env(with(base(), k, v)))
		require.ErrorContains(t, err, k)
	}
	_, err = deployment.FromEnv(env(map[string]string{deployment.EnvPrefix: "p"}))
	require.ErrorContains(t, err, "queue URL base")
	_, err = deployment.FromEnv(env(with(base(), deployment.EnvMaxFailures, "-1")))
	require.ErrorContains(t, err, `SAS_MAX_FAILURES="-1": must not be negative`)
	_, err = deployment.FromEnv(env(with(base(), deployment.EnvStepTimeout, "40s")))
	require.ErrorContains(t, err, `step "reserve-inventory"'s timeout 40s is longer than its agent function allows (25s: its timeout 30s less 5s)`)
	_, err = deployment.FromEnv(env(with(base(), deployment.EnvAgents, "payment")))
	require.ErrorContains(t, err, `unknown agent "inventory"`, "a topology without an agent a workflow calls")
}

func TestFromEnvLoadsTheWorkflowFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, name := range []string{"single", "fulfilment"} {
		b, err := workflow.ExampleFile(name)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "workflows"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "workflows", name+".yaml"), b, 0o600))
	}
	m := with(base(), deployment.EnvWorkflows, "workflows/single.yaml,workflows/fulfilment.yaml", "LAMBDA_TASK_ROOT", root)
	c, err := deployment.FromEnv(env(m))
	require.NoError(t, err)
	require.Equal(t, []string{"single", "fulfilment"}, c.Workflows.Names())
	require.Equal(t, []string{"payment", "warehouse", "billing", "loyalty", "courier"}, c.Topology.Agents)
	back, err := deployment.FromEnv(env(with(c.Env(), "LAMBDA_TASK_ROOT", root)))
	require.NoError(t, err)
	require.Equal(t, c, back)

	_, err = deployment.FromEnv(env(with(m, deployment.EnvWorkflows, "workflows/none.yaml")))
	require.ErrorContains(t, err, "none.yaml: no such file")
	require.NoError(t, os.WriteFile(filepath.Join(root, "workflows", "slow.yaml"),
		[]byte("name: slow\nagents: {a: {endpoint: 'http://a'}}\nsteps: [{name: s, agent: a, timeout: 1m}]\n"), 0o600))
	_, err = deployment.FromEnv(env(with(m, deployment.EnvWorkflows, "workflows/slow.yaml")))
	require.EqualError(t, err, filepath.Join(root, "workflows", "slow.yaml")+
		`:3: steps[0].timeout: step "s"'s timeout 1m0s is longer than its agent function allows (25s: its timeout less the time to reply)`)
}

// The stack tells the functions its key whenever it has one
// (SAS_DATA_KEY), and whether new orders are sealed (SAS_SEAL_DATA): with
// sealData off the key opens what was sealed before, and Submission seals
// nothing new. A function of before, told a key and nothing of sealData,
// seals, as it did; without a key nothing is sealed nor opened.
func TestTheDataKeyOpensWhatWasSealedWithSealDataOff(t *testing.T) {
	t.Parallel()
	const key = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	for _, c := range []struct {
		key, sealData string
		seals         bool
	}{{key, "true", true}, {key, "false", false}, {key, "", true}, {"", "false", false}} {
		got, err := deployment.FromEnv(env(with(base(), deployment.EnvDataKey, c.key, deployment.EnvSealData, c.sealData)))
		require.NoError(t, err)
		require.Equal(t, c.seals, got.SealData, "%+v", c)
		d := deployment.Deployment{Config: got, Clients: &awsclient.Clients{}}
		require.Equal(t, c.key != "", d.Kept().Seals(), "%+v: a sealer that opens whenever there is a key", c)
		back, err := deployment.FromEnv(env(got.Env()))
		require.NoError(t, err)
		require.Equal(t, got, back, "%+v", c)
	}
}

// The Supervisor a deployment builds (the Lambda's, and the local
// pipeline's) runs the census at the cadence its environment sets
// (SAS_CENSUS_EVERY, hourly unset), judging by the workflows it loads.
func TestTheSupervisorRunsTheCensusOfTheDeploymentsWorkflows(t *testing.T) {
	t.Parallel()
	for every, want := range map[string]time.Duration{"": time.Hour, "5s": 5 * time.Second} {
		got, err := deployment.FromEnv(env(with(base(), deployment.EnvCensusEvery, every)))
		require.NoError(t, err)
		d := deployment.Deployment{Config: got, Clients: &awsclient.Clients{}, Log: slog.New(slog.DiscardHandler)}
		cfg, deps := d.SupervisorParts("test")
		require.Equal(t, want, cfg.CensusEvery, "SAS_CENSUS_EVERY=%q", every)
		require.NotNil(t, deps.Census)
		require.Equal(t, got.Workflows.Names(), deps.Census.Workflows.Names())
		require.NotNil(t, deps.Census.Alerts)
	}
	_, err := deployment.FromEnv(env(with(base(), deployment.EnvCensusEvery, "10ms")))
	require.ErrorContains(t, err, "at least 1s")
}
