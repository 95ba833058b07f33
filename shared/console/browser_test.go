package console_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// browser starts a headless Chromium (Debian's chromium) with the flags that
// keep it off the network, and returns a context that drives it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed (.ci/tools installs it): ", err)
		}
		t.Skip("chromium is not installed: apt-get install chromium (.ci/tools does)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1360, 1000),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The browser lives as long as the context of the first call: no
	// timeout on that one; the steps after it are bounded.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")), "start chromium")
	tctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancel)
	return tctx
}

// The console in a real browser: an order refused for good is found in the
// Failed list, its page shows its graph, and once the fault is cleared its
// resubmission through the button and the confirmation brings it to
// Processed; the alert of its failure is on the alerts page.
func TestConsoleInABrowserResubmitsAFailedOrder(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	p.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"web-fail"}})
	var bodies []string
	for i, id := range []string{"web-fail", "web-ok-1", "web-ok-2"} {
		bodies = append(bodies, localrun.DemoOrder(id, i).JSON())
	}
	require.NoError(t, p.stack.SendOrders(t.Context(), bodies...))
	p.waitState(t, "web-fail", workflow.Failed)
	p.sim.SetFaults("shipping", remotesim.Faults{})

	ctx := browser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	steps(t, ctx, "open the list, then the failed order",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(css(`#orders`)),
		chromedp.Click(css(`a[data-tab="Failed"]`)),
		chromedp.WaitVisible(css(`tr[data-order="web-fail"] a`)),
		chromedp.Click(css(`tr[data-order="web-fail"] a`)),
		chromedp.WaitVisible(css(`#graph g[data-name="create-shipment"][data-state="Error"]`)),
		chromedp.WaitVisible(css(`#graph g[data-name="refund-payment"][data-state="Processed"]`)),
	)
	lastError, err := chromedp.Run(ctx, chromedp.Text(css(`#last-error`)))
	require.NoError(t, err)
	require.Contains(t, lastError, "shipping refuses create-shipment for order web-fail")
	failedShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)

	steps(t, ctx, "resubmit it",
		chromedp.Click(css(`#resubmit`)),
		chromedp.WaitVisible(css(`#confirm`)),
		chromedp.Click(css(`#confirm`)),
		chromedp.WaitVisible(css(`#flash`)),
	)
	flash, err := chromedp.Run(ctx, chromedp.Text(css(`#flash`)))
	require.NoError(t, err)
	require.Contains(t, flash, "Resubmitted: step reserve-inventory is Pending again (round 2)", "a Failed order runs again from its first step")
	// The page refreshes itself until the order ends.
	steps(t, ctx, "see it reach Processed",
		chromedp.WaitVisible(css(`#task-state[data-state="Processed"]`)),
		chromedp.WaitVisible(css(`#graph g[data-name="create-shipment"][data-state="Processed"]`)),
	)
	doneShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	saveScreenshots(t, failedShot, doneShot)
	// The failure's alert was received, and shows with its last error.
	steps(t, ctx, "see its alert",
		chromedp.Click(css(`header nav a[href="/alerts"]`)),
		chromedp.WaitVisible(css(`#alerts a[href="/orders/web-fail"]`)),
	)
	alerts, err := chromedp.Run(ctx, chromedp.Text(css(`#alerts`)))
	require.NoError(t, err)
	require.Contains(t, alerts, "shipping refuses create-shipment for order web-fail")
}

// The console in a real browser, on an order that waits for its approval:
// the graph shows the step waiting, the timeline when it began; the form on
// the page sends the event, and the order goes on to Processed, its undo
// actions not needed.
func TestConsoleInABrowserSendsAnEventToAWaitingOrder(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	require.NoError(t, p.stack.SendOrders(t.Context(), approvalOrder("web-wait")))
	p.waitParked(t, "web-wait", 1)

	ctx := browser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	steps(t, ctx, "open the waiting order",
		chromedp.Navigate(base+"/orders/web-wait"),
		chromedp.WaitVisible(css(`#graph g[data-name="await-approval"][data-waiting="event"]`)),
		chromedp.WaitVisible(css(`#signal-event`)),
	)
	timeline, err := chromedp.Run(ctx, chromedp.Text(css(`#timeline`)))
	require.NoError(t, err)
	require.Contains(t, timeline, `waits for event "approved" until`)
	box, err := chromedp.Run(ctx, chromedp.TextContent(css(`#graph g[data-name="await-approval"]`))) // an SVG element has no innerText
	require.NoError(t, err)
	require.Contains(t, box, "wait · approved · Pending")
	require.Contains(t, box, "waits since")

	steps(t, ctx, "send the approval from the form",
		chromedp.SendKeys(css(`#signal-data`), `{"amountCents": 1998, "by": "ana"}`),
		chromedp.Click(css(`#signal-send`)),
		chromedp.WaitVisible(css(`#flash`)),
	)
	flash, err := chromedp.Run(ctx, chromedp.Text(css(`#flash`)))
	require.NoError(t, err)
	require.Regexp(t, `Sent event approved \(eventId sasctl-[0-9a-f]{16}\) to the events queue`, flash)
	steps(t, ctx, "see it go on to Processed",
		chromedp.WaitVisible(css(`#task-state[data-state="Processed"]`)),
		chromedp.WaitVisible(css(`#graph g[data-name="await-approval"][data-state="Processed"]`)),
		chromedp.WaitVisible(css(`#graph g[data-name="refund-approved"][data-state="NotNeeded"]`)),
	)
	charged := false
	for _, e := range p.sim.Ledger() {
		if e.OrderID == "web-wait" && e.Action == "charge-payment" {
			var in struct{ ApprovedBy string }
			require.NoError(t, json.Unmarshal(e.Input, &in))
			require.Equal(t, "ana", in.ApprovedBy, "the charge got the approval's data")
			charged = true
		}
	}
	require.True(t, charged, "the order was charged")
}

// The orders page's search in a real browser: by id prefix in an ended
// state, by workflow in flight, and by age; each search is in the page's URL,
// and the list shows each order's workflow.
func TestConsoleInABrowserSearchesOrdersByPrefixAndWorkflow(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	var bodies []string
	for i, id := range []string{"find-a1", "find-a2", "find-b1"} {
		bodies = append(bodies, localrun.DemoOrder(id, i).JSON())
	}
	require.NoError(t, p.stack.SendOrders(t.Context(), append(bodies, approvalOrder("find-a3"))...))
	for _, id := range []string{"find-a1", "find-a2", "find-b1"} {
		p.waitState(t, id, workflow.Processed)
	}
	p.waitParked(t, "find-a3", 1)

	ctx := browser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	// listed is the orders of the page's list whose id starts with find-,
	// by id, with their workflow (its cell says it, and its version).
	listed := func(what string) map[string]string {
		t.Helper()
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(
			[...document.querySelectorAll('#orders tr[data-order^="find-"]')].map(r => [r.dataset.order, r.querySelector('td.wf').dataset.workflow]))`))
		require.NoError(t, err, what)
		return rows
	}
	search := func(what, state, prefix, wf, older, newer string) {
		t.Helper()
		actions := []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "/"), chromedp.WaitVisible(css(`#search`)),
			chromedp.SetValue(css(`#search-state`), state)}
		for field, v := range map[string]string{"prefix": prefix, "workflow": wf, "older": older, "newer": newer} {
			if v != "" { // the fields of a page opened without a search are empty
				actions = append(actions, chromedp.SendKeys(css(`#search-`+field), v))
			}
		}
		steps(t, ctx, what, append(actions, chromedp.Click(css(`#search-go`)),
			chromedp.WaitVisible(css(`#search-clear`)), chromedp.WaitVisible(css(`#orders`)))...)
	}

	search("search Processed by prefix", "Processed", "find-a", "", "", "")
	require.Equal(t, map[string]string{"find-a1": "order", "find-a2": "order"}, listed("by prefix"))
	location, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, location, "prefix=find-a")
	require.Contains(t, location, "state=Processed")
	steps(t, ctx, "the link keeps the search", chromedp.Navigate(location), chromedp.WaitVisible(css(`#search-clear`)))
	require.Equal(t, map[string]string{"find-a1": "order", "find-a2": "order"}, listed("the same link"))

	search("search in flight by workflow", "inflight", "find-", "approval", "", "")
	require.Equal(t, map[string]string{"find-a3": "approval"}, listed("by workflow"))
	search("search Processed by workflow", "Processed", "find-", "order", "", "")
	require.Equal(t, map[string]string{"find-a1": "order", "find-a2": "order", "find-b1": "order"}, listed("order's"))

	search("search by age: new", "Processed", "find-", "", "", "1h")
	require.Len(t, listed("newer than 1h"), 3)
	search("search by age: old", "Processed", "find-", "", "1h", "")
	require.Empty(t, listed("older than 1h"))
	empty, err := chromedp.Run(ctx, chromedp.Text(css(`#orders td.empty`)))
	require.NoError(t, err)
	require.Contains(t, empty, "match the search")
}

// The console in a real browser finds the orders of a customer by the
// workflow's searchable field, then by the agent they were at, and the
// form keeps what was typed.
func TestConsoleInABrowserFindsOrdersByAFieldAndAnAgent(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	orders := map[string]int{"find-f1": 71, "find-f2": 71, "find-f3": 72}
	var bodies []string
	for id, customer := range orders {
		bodies = append(bodies, localrun.DemoOrder(id, customer).JSON())
	}
	require.NoError(t, p.stack.SendOrders(t.Context(), bodies...))
	for id := range orders {
		p.waitState(t, id, workflow.Processed)
	}
	ctx := browser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	search := func(what string, fields map[string]string) []string {
		t.Helper()
		actions := []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "/"), chromedp.WaitVisible(css(`#search`)),
			chromedp.SetValue(css(`#search-state`), "Processed")}
		for field, v := range fields {
			actions = append(actions, chromedp.SendKeys(css(`#search-`+field), v))
		}
		steps(t, ctx, what, append(actions, chromedp.Click(css(`#search-go`)),
			chromedp.WaitVisible(css(`#search-clear`)), chromedp.WaitVisible(css(`#orders`)))...)
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#orders tr[data-order^="find-f"]')].map(r => r.dataset.order)`))
		require.NoError(t, err, what)
		return ids
	}
	require.ElementsMatch(t, []string{"find-f1", "find-f2"}, search("by customer", map[string]string{"field": "customerId=customer-71"}))
	kept, err := chromedp.Run(ctx, chromedp.Value(css(`#search-field`)))
	require.NoError(t, err)
	require.Equal(t, "customerId=customer-71", kept, "the form keeps the field")
	require.Equal(t, []string{"find-f3"}, search("by the other customer", map[string]string{"field": "customerId=customer-72"}))
	require.Empty(t, search("by a customer and an agent none was at", map[string]string{"field": "customerId=customer-71", "agent": "payment"}),
		"a Processed order is at no step")
	require.ElementsMatch(t, []string{"find-f1", "find-f2"}, search("by customer, ended within the hour",
		map[string]string{"field": "customerId=customer-71", "ended-after": "1h"}))
}

// steps runs the browser's actions; if one fails, the test fails with the
// page it was on, and a screenshot of it in .run/console-failure.png.
func steps(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	err := chromedp.Do(ctx, actions...)
	if err == nil {
		return
	}
	location, _ := chromedp.Run(ctx, chromedp.Location())
	if shot, serr := chromedp.Run(ctx, chromedp.FullScreenshot(90)); serr == nil {
		path := filepath.Join(moduleRoot(t), ".run", "console-failure.png")
		if os.MkdirAll(filepath.Dir(path), 0o755) == nil && os.WriteFile(path, shot, 0o644) == nil {
			t.Logf("the page when it failed: %s", path)
		}
	}
	t.Fatalf("%s, at %s: %v", what, location, err)
}

// saveScreenshots writes the failed order's page to .run/console.png (and its
// page once Processed beside it), and the same image to docs/console.png for
// the README when that is missing or SAS_UPDATE_SCREENSHOT=1: the pages show
// times, so a new image at every run would change a committed file.
func saveScreenshots(t *testing.T, failed, done []byte) {
	t.Helper()
	root := moduleRoot(t)
	run := filepath.Join(root, ".run")
	require.NoError(t, os.MkdirAll(run, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(run, "console.png"), failed, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(run, "console-processed.png"), done, 0o644))
	t.Logf("screenshots: %s, %s", filepath.Join(run, "console.png"), filepath.Join(run, "console-processed.png"))
	docs := filepath.Join(root, "docs", "console.png")
	if _, err := os.Stat(docs); err == nil && os.Getenv("SAS_UPDATE_SCREENSHOT") != "1" {
		return
	}
	require.NoError(t, os.WriteFile(docs, failed, 0o644))
	t.Logf("README screenshot: %s", docs)
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	t.Fatal("no go.mod above ", dir)
	return ""
}
