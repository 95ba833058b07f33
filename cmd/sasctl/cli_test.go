package main

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// A setting that is true or false is a flag of its own, as pflag's BoolVar
// makes one: alone it is true, and the argument after it is the next flag,
// not its value (`sasctl dev --seal-data --workflows F` was refused).
func TestABooleanSettingsFlagNeedsNoValue(t *testing.T) {
	for _, c := range []struct {
		args []string
		seal bool
	}{
		{[]string{"--seal-data", "--workflows", "a.yaml"}, true},
		{[]string{"--workflows", "a.yaml", "--seal-data"}, true},
		{[]string{"--seal-data=false", "--workflows", "a.yaml"}, false},
		{[]string{"--seal-data=true", "--workflows", "a.yaml"}, true},
		{[]string{"--workflows", "a.yaml"}, false},
	} {
		var f settingFlags
		fs := pflag.NewFlagSet("dev", pflag.ContinueOnError)
		f.bind(fs, "sealData", "workflows")
		require.NoError(t, fs.Parse(c.args), "%v", c.args)
		require.Equal(t, c.seal, f.SealData, "%v", c.args)
		require.Equal(t, []string{"a.yaml"}, f.WorkflowFiles, "%v", c.args)
		require.Empty(t, fs.Args(), "%v", c.args)
	}
	var f settingFlags
	fs := pflag.NewFlagSet("dev", pflag.ContinueOnError)
	f.bind(fs, "sealData")
	require.ErrorContains(t, fs.Parse([]string{"--seal-data=maybe"}), "not true or false")
}
