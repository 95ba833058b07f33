package console_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// The console in a real browser acts on the orders a search finds: the
// held orders of a prefix are found, the bulk form's dry run lists them
// as ones it would retry, its confirmation retries them and shows the
// report with the name each order's history keeps, and they go on to
// Processed.
func TestConsoleInABrowserRetriesTheHeldOrdersASearchFinds(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	ids := []string{"web-bulk-1", "web-bulk-2"}
	heldOrders(t, p, ids...)
	p.sim.SetFaults("payment", remotesim.Faults{}) // the bank answers again

	ctx := browser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	steps(t, ctx, "search the held orders",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(css(`#search`)),
		chromedp.SetValue(css(`#search-state`), "Held"),
		chromedp.SendKeys(css(`#search-prefix`), "web-bulk-"),
		chromedp.Click(css(`#search-go`)),
		chromedp.WaitVisible(css(`#search-clear`)),
		chromedp.WaitVisible(css(`tr[data-order="web-bulk-2"]`)),
	)
	listShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	action, err := chromedp.Run(ctx, chromedp.Value(css(`#bulk-action`)))
	require.NoError(t, err)
	require.Equal(t, "retry", action, "the Held list offers retry")
	steps(t, ctx, "dry run",
		chromedp.Click(css(`#bulk-dry`)),
		chromedp.WaitVisible(css(`#bulk-confirm`)),
	)
	counts, err := chromedp.Run(ctx, chromedp.Text(css(`#bulk-counts`)))
	require.NoError(t, err)
	require.Contains(t, counts, "2 listed · 2 it would retry · 0 done already · 0 refused")
	would, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#bulk-orders tr[data-outcome="would"]')].map(r => r.dataset.order)`))
	require.NoError(t, err)
	require.ElementsMatch(t, ids, would)
	dryShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)

	steps(t, ctx, "confirm",
		chromedp.Click(css(`#bulk-confirm`)),
		chromedp.WaitVisible(css(`#bulk-by`)),
	)
	flash, err := chromedp.Run(ctx, chromedp.Text(css(`#flash`)))
	require.NoError(t, err)
	require.Contains(t, flash, "retry: 2 of 2 orders done.")
	counts, err = chromedp.Run(ctx, chromedp.Text(css(`#bulk-counts`)))
	require.NoError(t, err)
	require.Contains(t, counts, "2 listed · 2 done · 0 done already · 0 refused · 0 changed since listed · 0 left")
	by, err := chromedp.Run(ctx, chromedp.Text(css(`#bulk-by`)))
	require.NoError(t, err)
	require.Regexp(t, `^console-test retry \(bulk \S+, 2 orders\)$`, by)
	doneShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	run := filepath.Join(moduleRoot(t), ".run")
	require.NoError(t, os.MkdirAll(run, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(run, "console-bulk-list.png"), listShot, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(run, "console-bulk-dry-run.png"), dryShot, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(run, "console-bulk-report.png"), doneShot, 0o644))
	for _, id := range ids {
		p.waitState(t, id, workflow.Processed)
	}
}
