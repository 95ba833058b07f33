package deployment_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/deployment"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvDefaultsAndRoundTrip(t *testing.T) {
	t.Parallel()
	c, err := deployment.FromEnv(env(map[string]string{
		deployment.EnvPrefix: "shop", deployment.EnvQueueURLBase: "https://sqs.example/123/",
		deployment.EnvAlertTopicARN: "arn:aws:sns:us-east-1:000000000000:shop-alerts",
		deployment.EnvStepTimeout:   "45s", deployment.EnvMaxFailures: "4",
	}))
	require.NoError(t, err)
	require.Equal(t, 45*time.Second, c.Settings.StepTimeout)
	require.Equal(t, 4, c.Settings.MaxFailures)
	require.Equal(t, time.Minute, c.Settings.PickupTimeout, "default")
	require.Equal(t, "https://sqs.example/123/shop-scheduler", c.QueueURL(c.Topology.SchedulerQueue().Name))
	back, err := deployment.FromEnv(env(c.Env()))
	require.NoError(t, err)
	require.Equal(t, c, back)
}

func TestFromEnvSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	_, err := deployment.FromEnv(env(nil))
	require.ErrorContains(t, err, "SAS_PREFIX is not set")
	base := map[string]string{deployment.EnvPrefix: "p", deployment.EnvQueueURLBase: "u", deployment.EnvAlertTopicARN: "a"}
	for k, v := range map[string]string{deployment.EnvStepTimeout: "soon", deployment.EnvMaxFailures: "three",
		deployment.EnvShards: "x"} {
		m := map[string]string{k: v}
		for bk, bv := range base {
			m[bk] = bv
		}
		_, err := deployment.FromEnv(env(m))
		require.ErrorContains(t, err, k)
	}
	_, err = deployment.FromEnv(env(map[string]string{deployment.EnvPrefix: "p"}))
	require.ErrorContains(t, err, "queue URL base")
	m := map[string]string{deployment.EnvMaxFailures: "0"}
	for bk, bv := range base {
		m[bk] = bv
	}
	_, err = deployment.FromEnv(env(m))
	require.ErrorContains(t, err, "failure threshold")
}

func TestFromEnvChoosesTheWorkflow(t *testing.T) {
	t.Parallel()
	base := map[string]string{deployment.EnvPrefix: "p", deployment.EnvQueueURLBase: "u", deployment.EnvAlertTopicARN: "a",
		deployment.EnvAgents: "payment", deployment.EnvWorkflow: "single"}
	c, err := deployment.FromEnv(env(base))
	require.NoError(t, err)
	require.Len(t, c.Workflow().Steps, 1)
	back, err := deployment.FromEnv(env(c.Env()))
	require.NoError(t, err)
	require.Equal(t, c, back)
	base[deployment.EnvWorkflow] = "saga"
	_, err = deployment.FromEnv(env(base))
	require.ErrorContains(t, err, `unknown workflow "saga"`)
}
