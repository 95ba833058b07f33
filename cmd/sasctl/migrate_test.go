package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// approvalV2 is the approval example with a fraud check before the wait,
// which waits 90 h rather than 72, written in dir.
func approvalV2(t *testing.T, dir string) (file string, d workflow.Definition) {
	t.Helper()
	v1, err := workflow.ExampleFile("approval")
	require.NoError(t, err)
	v2 := strings.Replace(string(v1), "  - name: await-approval\n",
		"  - name: fraud-check\n    agent: payment\n    undo: none\n  - name: await-approval\n", 1)
	v2 = strings.Replace(v2, "timeout: 72h", "timeout: 90h", 1)
	require.NotEqual(t, string(v1), v2)
	file = filepath.Join(dir, "approval.yaml")
	require.NoError(t, os.WriteFile(file, []byte(v2), 0o600))
	d, err = workflow.LoadFile(file, workflow.Options{})
	require.NoError(t, err)
	return file, d
}

// Three orders wait for their approval under the version they started
// with; the workflow gains a fraud check. A dry run says what each would
// do and writes nothing; a canary moves one, which runs the fraud check and
// waits again; the rest follow; every order then ends Processed, each
// checked once. A move back is a migration like any other.
func TestOrdersWaitingForApprovalMoveToANewVersionAndBack(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	ctx := context.Background()
	ids := []string{"o-mv1", "o-mv2", "o-mv3"}
	for _, id := range ids {
		code, _, errs := p.ctl(approvalOrder(id), "submit", "-")
		require.Zero(t, code, errs)
	}
	for _, id := range ids {
		p.parked(id, 1)
	}
	overrides := []string{"--step-timeout", "8s", "--max-failures", "3", "--pickup-timeout", "2s"} // the pipeline's (newPipeline)
	settings := workflow.Settings{StepTimeout: 8 * time.Second, MaxFailures: 3, PickupTimeout: 2 * time.Second}
	v1 := workflow.MustExample("approval").With(settings)
	file, v2 := approvalV2(t, t.TempDir())
	v2 = v2.With(settings)
	first, _, err := p.stack.Store.Load(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, v1.Version, first.Version)

	code, out, errs := p.ctl("", "migrate", append([]string{"--to", file, "--dry-run"}, overrides...)...)
	require.Zero(t, code, errs)
	for _, id := range ids {
		require.Contains(t, out, id+": moves from "+v1.Version+" to "+v2.Version+": runs next fraud-check; would undo release-inventory\n")
	}
	require.Contains(t, out, "workflow approval to version "+v2.Version+": 3 looked at, 3 would move, 0 already there, 0 cannot move now")
	for _, id := range ids {
		task, _, err := p.stack.Store.Load(ctx, id)
		require.NoError(t, err)
		require.Equal(t, v1.Version, task.Version, "a dry run writes nothing")
	}

	var canary operator.MoveReport
	p.json("migrate", &canary, "migrate", append([]string{"--to", file, "--count", "1"}, overrides...)...)
	require.Equal(t, 1, canary.Moves)
	moved := canary.Orders[0].OrderID
	p.parked(moved, 2) // the fraud check ran, and the wait is armed again
	require.Contains(t, p.keys(moved), moved+"/fraud-check")
	code, out, _ = p.ctl("", "status", moved)
	require.Zero(t, code)
	require.Regexp(t, `moved from version `+v1.Version+` to `+v2.Version+` by sasctl.* at \S+Z\n  runs version `+v2.Version, out)

	code, out, _ = p.ctl("", "workflow versions", append([]string{"--workflows", file}, overrides...)...)
	require.Equal(t, 1, code, "orders in flight run a version the deployment does not:\n%s", out)
	requireRow(t, out, "approval", v1.Version, "2", "Pending", "2", "NO:", "sasctl", "migrate", "moves", "them", strings.Join(slices.DeleteFunc(
		slices.Clone(ids), func(id string) bool { return id == moved }), " "))
	requireRow(t, out, "approval", v2.Version, "1", "Pending", "1", "yes", moved)

	var rest operator.MoveReport
	p.json("migrate", &rest, "migrate", append([]string{"--to", file}, overrides...)...)
	require.Equal(t, 2, rest.Moves)
	require.Equal(t, 1, rest.Already, "run again, it skips the order moved")
	for _, id := range ids {
		p.parked(id, 2)
	}

	// A move back: the fraud check changed nothing to undo, so it may go.
	back := ids[0]
	if back == moved {
		back = ids[1]
	}
	text, err := workflow.ExampleFile("approval")
	require.NoError(t, err)
	v1File := filepath.Join(t.TempDir(), "approval.yaml")
	require.NoError(t, os.WriteFile(v1File, text, 0o600))
	code, out, errs = p.ctl("", "migrate", append([]string{"--to", v1File, back}, overrides...)...)
	require.Zero(t, code, errs)
	require.Contains(t, out, back+": moved from "+v2.Version+" to "+v1.Version+": leaves fraud-check; would undo release-inventory\n")

	for _, id := range ids {
		code, _, errs := p.ctl("", "signal", id, "approved", "--data", `{"amountCents": 500, "by": "ana"}`)
		require.Zero(t, code, errs)
	}
	for _, id := range ids {
		p.waitState(id, workflow.Processed)
		require.Equal(t, []string{id + "/reserve-inventory", id + "/fraud-check", id + "/charge-approved"}, p.keys(id),
			"each order checked once, and charged once, after its move")
	}
	task, _, err := p.stack.Store.Load(ctx, back)
	require.NoError(t, err)
	require.Equal(t, v1.Version, task.Version)
	require.Len(t, task.Moves, 2)
}
