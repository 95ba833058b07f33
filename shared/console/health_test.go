package console_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// healthOrders runs three orders of the order workflow to Processed, one
// to Failed (its payment refunded), and leaves an approval order waiting.
func healthOrders(t *testing.T, p *pipeline, prefix string) {
	t.Helper()
	fail := prefix + "-fail"
	p.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{fail}})
	t.Cleanup(func() { p.sim.SetFaults("shipping", remotesim.Faults{}) })
	var bodies []string
	for i, id := range []string{prefix + "-ok-1", prefix + "-ok-2", prefix + "-ok-3", fail} {
		bodies = append(bodies, localrun.DemoOrder(id, i).JSON())
	}
	bodies = append(bodies, approvalOrder(prefix+"-wait"))
	require.NoError(t, p.stack.SendOrders(t.Context(), bodies...))
	for _, id := range []string{prefix + "-ok-1", prefix + "-ok-2", prefix + "-ok-3"} {
		p.waitState(t, id, workflow.Processed)
	}
	p.waitState(t, fail, workflow.Failed)
	p.waitParked(t, prefix+"-wait", 1)
}

// of is the health of workflow wf's one version.
func of(t *testing.T, hs []operator.WorkflowHealth, wf string) operator.WorkflowHealth {
	t.Helper()
	for _, h := range hs {
		if h.Workflow == wf {
			return h
		}
	}
	require.Failf(t, "no health", "workflow %s is not on the health page: %+v", wf, hs)
	return operator.WorkflowHealth{}
}

// The health page shows each workflow version's orders ended by state, its
// failure and compensation rates, its order's and each step's percentiles,
// and its orders in flight by what they wait on: read from the ending
// writes' hourly counts and the in-flight index.
func TestTheHealthPageShowsEachWorkflowsFigures(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	healthOrders(t, p, "health-http")

	hs, err := p.op.Health(t.Context(), p.op.Now())
	require.NoError(t, err)
	order := of(t, hs, "order")
	require.GreaterOrEqual(t, order.Day.Ended[workflow.Processed], int64(3))
	require.GreaterOrEqual(t, order.Day.Ended[workflow.Failed], int64(1))
	require.Positive(t, order.Hour.FailureRate)
	require.Positive(t, order.Hour.CompensationRate, "the failed order's payment was refunded")
	require.GreaterOrEqual(t, order.Hour.Started, int64(4))
	require.GreaterOrEqual(t, order.Hour.Order.Count, int64(4))
	require.Positive(t, order.Hour.Order.P99)
	var names []string
	for _, s := range order.Day.Steps {
		names = append(names, s.Name)
	}
	require.Subset(t, names, []string{"reserve-inventory", "charge-payment", "create-shipment"})
	approval := of(t, hs, "approval")
	require.GreaterOrEqual(t, approval.InFlight, 1)
	require.GreaterOrEqual(t, approval.Waiting["event: approved"], 1, "waiting for its event, not at work")

	code, body := get(t, base+"/health")
	require.Equal(t, http.StatusOK, code, body)
	for _, want := range []string{`data-workflow="order"`, `data-workflow="approval"`, `data-step="charge-payment"`,
		`class="failure-rate"`, `<tr class="window-hour">`, `<tr class="window-day">`, `href="/health" class="on"`} {
		require.Contains(t, body, want)
	}
	code, body = get(t, base+"/health?partial=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `data-workflow="order"`, "the live refresh's block")
}

// The health page in a real browser, as an operator sees it: its
// screenshot is kept in .run/health.png and, the first time or with
// SAS_UPDATE_SCREENSHOT=1, docs/health.png.
func TestTheHealthPageInABrowser(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	healthOrders(t, p, "health-web")
	ctx := browser(t)
	steps(t, ctx, "open the health page from the menu",
		chromedp.Navigate(base+"/"),
		chromedp.Click(chromedp.CSS(`header nav a[href="/health"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[data-workflow="order"] tr.window-day td.failure-rate`)),
		chromedp.WaitVisible(chromedp.CSS(`section[data-workflow="order"] tr[data-step="charge-payment"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[data-workflow="approval"] p.inflight`)),
	)
	rate, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`section[data-workflow="order"] tr.window-day td.failure-rate`)))
	require.NoError(t, err)
	require.NotEqual(t, "0.0%", rate, "a failed order in the day")
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	root := moduleRoot(t)
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".run"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, ".run", "health.png"), shot, 0o644))
	docs := filepath.Join(root, "docs", "health.png")
	if _, err := os.Stat(docs); err != nil || os.Getenv("SAS_UPDATE_SCREENSHOT") == "1" {
		require.NoError(t, os.WriteFile(docs, shot, 0o644))
		t.Logf("screenshot: %s", docs)
	}
}
