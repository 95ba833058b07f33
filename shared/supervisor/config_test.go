package supervisor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/supervisor"
)

// A zero limit takes its default; a limit the sweep cannot use is refused
// with its name, and New refuses it too.
func TestConfigDefaultsAndLimits(t *testing.T) {
	t.Parallel()
	d := supervisor.Config{}.WithDefaults()
	require.Equal(t, supervisor.Config{BacklogDepth: supervisor.BacklogDepthDefault, Parallel: supervisor.ParallelDefault,
		ShardParallelism: supervisor.ShardParallelismDefault, PageSize: supervisor.PageSizeDefault,
		TimeBudget: supervisor.TimeBudgetDefault, CensusEvery: supervisor.CensusEveryDefault,
		CensusBudget: supervisor.CensusBudgetDefault}, d)
	require.Equal(t, time.Second, supervisor.Config{TimeBudget: time.Second}.WithDefaults().CensusBudget,
		"the census's share is at most the sweep's budget")
	require.NoError(t, supervisor.Config{}.Validate())
	for want, c := range map[string]supervisor.Config{
		"backlog depth":     {BacklogDepth: -1},
		"parallel":          {Parallel: -2},
		"shard parallelism": {ShardParallelism: -1},
		"page size":         {PageSize: 101},
		"time budget":       {TimeBudget: 16 * time.Minute},
		"census period":     {CensusEvery: -time.Minute},
		"census budget":     {TimeBudget: time.Second, CensusBudget: 2 * time.Second},
	} {
		require.ErrorContains(t, c.Validate(), want)
		require.Panics(t, func() { supervisor.New(c, supervisor.Deps{}) }, want)
	}
}
