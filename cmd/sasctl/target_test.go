package main

import (
	"context"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// A command on a deployment takes the deployment's retention (its flag, or
// $SAS_RETENTION_DAYS; 0 is forever, as the deployment's 0; neither, it is
// not told, and sets no expiry), and its
// payload bucket: --payload-bucket, else, against an emulator, the local
// stack's; against AWS none, where the stack's has a name CloudFormation
// makes (what needs it then says to set it).
func TestATargetTakesTheDeploymentsRetentionAndBucket(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("SAS_PAYLOAD_BUCKET", "")
	for _, c := range []struct {
		env    string
		args   []string
		days   int
		told   bool // not told, an operator sets no expiry (operator.New)
		bucket string
	}{
		{"", []string{"--prefix", "Shop"}, 90, false, ""},
		{"0", []string{"--prefix", "Shop"}, 0, true, ""},
		{"", []string{"--prefix", "Shop", "--retention-days", "30", "--payload-bucket", "shop-pipeline-payloadbucket-1x2y"}, 30, true, "shop-pipeline-payloadbucket-1x2y"},
		{"", []string{"--prefix", "Shop", "--endpoint", "http://127.0.0.1:4566"}, 90, false, "shop-payloads"},
	} {
		t.Setenv("SAS_RETENTION_DAYS", c.env)
		var tg target
		cmd := &cobra.Command{Use: "x"}
		targetFlags(cmd, &tg, false)
		require.NoError(t, cmd.Flags().Parse(c.args), "%v", c.args)
		require.NoError(t, tg.check(cmd, nil))
		require.Equal(t, c.days, tg.RetentionDays, "%v", c.args)
		require.Equal(t, c.told, tg.told("retentionDays"), "%v", c.args)
		op, err := tg.connect(context.Background(), false)
		require.NoError(t, err)
		require.Equal(t, c.bucket, op.PayloadBucket, "%v", c.args)
		_, told := op.Store.Retention()
		require.Equal(t, c.told, told, "%v: its store told as the command was", c.args)
	}
}
