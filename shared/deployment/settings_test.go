package deployment_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/deployment"
)

// Every setting has its names once, a value that reads back what it prints,
// and a use: at least one of a context key, an environment variable and a
// flag.
func TestTheTableNamesEachSettingOnce(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, st := range deployment.Table {
		require.NotEmpty(t, st.Name)
		require.NotEmpty(t, st.Usage, st.Name)
		require.True(t, st.Context != "" || st.Env != "" || st.Flag != "", "%s is set nowhere", st.Name)
		for _, key := range []string{"name " + st.Name, "context " + st.Context, "env " + st.Env, "flag " + st.Flag} {
			if strings.HasSuffix(key, " ") {
				continue
			}
			require.NotContains(t, seen, key, "%s and %s", seen[key], st.Name)
			seen[key] = st.Name
		}
		if st.Context != "" {
			require.Equal(t, st.Name, st.Context, "a setting with a context key is named by it")
		}
		s := deployment.DefaultSettings()
		v := st.Value(&s)
		text := v.String()
		require.NoError(t, v.Set(text), "%s reads back its default %q", st.Name, text)
		require.Equal(t, text, v.String(), st.Name)
	}
}

func TestEachSettingChecksWhatItReads(t *testing.T) {
	t.Parallel()
	for name, bad := range map[string]string{
		"prefix": "-shop", "stepTimeout": "-1s", "maxFailures": "-1", "backlogDepth": "0", "supervisorRate": "0s",
		"batchWindowSeconds": "1.5", "queueWaitAlarm": "59s", "remoteBaseUrl": "ftp://x", "deadlineShards": "0",
		"functionTimeout": "5s", "orderDeadline": "a day", "allowedReplyQueuePrefixes": "ok-,",
		"submissionConcurrency": "1", "schedulerConcurrency": "1001", "agentConcurrency": "x", "targetRate": "-1",
		"supervisorParallelism": "0", "retentionDays": "-1",
		"vpcId": "vpc-x", "vpcSubnets": "sg-0123abcd", "vpcSecurityGroups": "subnet-0123abcd", "vpcRouteTables": "rtb-",
		"vpcFunctions": "Payment", "agentNetworks": "payment", "vpcExistingEndpoints": "rds",
	} {
		st, ok := deployment.Lookup(name)
		require.True(t, ok, name)
		s := deployment.DefaultSettings()
		require.Error(t, st.Value(&s).Set(bad), "%s=%q", name, bad)
	}
	s, err := deployment.FromContext(func(k string) string {
		return map[string]string{"prefix": "shop", "batchWindowSeconds": "0", "supervisorRate": "5m",
			"allowedReplyQueuePrefixes": "shop-client-, shop-other-", "stepTimeout": "10s"}[k]
	})
	require.NoError(t, err)
	require.Equal(t, "shop", s.Topology.Prefix)
	require.Zero(t, s.Topology.BatchWindow)
	require.Equal(t, 5*time.Minute, s.SupervisorRate)
	require.Equal(t, []string{"shop-client-", "shop-other-"}, s.ReplyQueuePrefixes)
	require.Equal(t, 10*time.Second, s.Overrides.StepTimeout)
	require.Equal(t, 10, s.BacklogDepth, "the default")
	_, err = deployment.FromContext(func(k string) string { return map[string]string{"maxFailures": "three"}[k] })
	require.EqualError(t, err, `context maxFailures="three": "three" is not a whole number`)
}

// targetRate sizes the deadline index: its index writes over half a
// partition's, so 1,000 orders a second keep the default 4 shards and
// 10,000 take 40; with deadlineShards too it is refused, naming both.
func TestTargetRateSizesTheDeadlineIndex(t *testing.T) {
	t.Parallel()
	for rate, shards := range map[string]int{"1": 1, "1000": 4, "1001": 5, "10000": 40} {
		s, err := deployment.FromContext(func(k string) string { return map[string]string{"targetRate": rate}[k] })
		require.NoError(t, err)
		require.Equal(t, shards, s.Topology.DeadlineShards, rate)
	}
	_, err := deployment.FromContext(func(k string) string {
		return map[string]string{"targetRate": "100", "deadlineShards": "8"}[k]
	})
	require.ErrorContains(t, err, "targetRate=100 and deadlineShards=8")
	_, err = deployment.FromContext(func(k string) string { return map[string]string{"targetRate": "64001"}[k] })
	require.ErrorContains(t, err, "context targetRate")
}

// A setting whose default is not zero is written to the functions' environment
// when it is: retentionDays=0 keeps orders forever, not for the default 90 days.
func TestAZeroThatIsNotTheDefaultReachesTheFunctions(t *testing.T) {
	t.Parallel()
	s := deployment.DefaultSettings()
	require.Equal(t, "90", s.Env()[deployment.EnvRetentionDays])
	s.RetentionDays = 0
	require.Equal(t, "0", s.Env()[deployment.EnvRetentionDays])
}

// docs/settings.md has one row per setting, in the table's order, with its
// names and default as the table has them.
func TestTheDocsTableIsTheTable(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../../docs/settings.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(text), "| setting | CDK context |")
	require.True(t, ok, "the settings table's header")
	var rows [][]string
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|")[:5] {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	var want [][]string
	for _, st := range deployment.Table {
		want = append(want, []string{code(st.Name), code(st.Context), code(st.Env), code(flag(st.Flag)), defaultCell(st)})
	}
	require.Equal(t, want, rows, "docs/settings.md's table")
}

func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + s + "`"
}

func flag(s string) string {
	if s == "" {
		return ""
	}
	return "--" + s
}

// defaultCell is a default in code font when it is a value, in words when
// the table says it in words.
func defaultCell(st deployment.Setting) string {
	if st.Default != "" || st.DefaultText() == "none" {
		return st.DefaultText()
	}
	return code(st.DefaultText())
}
