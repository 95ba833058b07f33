package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// heldOrders submits orders of the order-hold workflow whose charge the
// bank refuses, and waits until each is Held; the test's end clears the
// fault.
func heldOrders(t *testing.T, p *pipeline, ids ...string) {
	t.Helper()
	p.sim.SetFaults("payment", remotesim.Faults{PermanentOrders: ids})
	t.Cleanup(func() { p.sim.SetFaults("payment", remotesim.Faults{}) })
	for i, id := range ids {
		o := localrun.DemoOrder(id, i)
		o.Workflow = "order-hold"
		require.NoError(t, p.stack.SendOrders(t.Context(), o.JSON()))
	}
	for _, id := range ids {
		p.waitState(t, id, workflow.Held)
	}
}

// tasks are the orders' state items as stored.
func tasks(t *testing.T, p *pipeline, ids ...string) map[string]statestore.Task {
	t.Helper()
	out, err := p.stack.Store.Tasks(context.Background(), ids)
	require.NoError(t, err)
	require.Len(t, out, len(ids))
	return out
}

var planRE = regexp.MustCompile(`action="/bulk/([0-9a-f]+)"`)

// The orders page acts on every order its search finds: the form's dry
// run lists what it would touch (and, for an action the orders do not
// fit, why not) and writes nothing; a bad action, a skip without its step
// and a result that is not JSON are refused; the confirmation needs the
// console's token and origin and refuses a count over the dry run's; it
// acts on the orders listed only (one undone meanwhile: changed since
// listed), reports, names the bulk in each order's history, and is taken
// once.
func TestOrdersFoundBySearchAreRetriedInBulkAfterADryRun(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	ids := []string{"con-bulk-1", "con-bulk-2", "con-bulk-3"}
	heldOrders(t, p, ids...)
	list := url.Values{"state": {"Held"}, "prefix": {"con-bulk-"}}
	_, body := get(t, base+"/?"+list.Encode())
	require.Contains(t, body, `<form id="bulk" class="search bulk" method="get" action="/bulk">`)
	require.Contains(t, body, `<input type="hidden" name="prefix" value="con-bulk-">`)
	require.Contains(t, body, `<option value="retry" selected>`, "a Held list offers retry first")

	before := tasks(t, p, ids...)
	dryRun := func(action string, more url.Values) (int, string) {
		q := url.Values{"action": {action}}
		for k, v := range list {
			q[k] = v
		}
		for k, v := range more {
			q[k] = v
		}
		return get(t, base+"/bulk?"+q.Encode())
	}
	code, body := dryRun("resubmit", nil)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `data-listed="3" data-done="0" data-already="0" data-refused="3"`)
	require.Contains(t, body, `<tr><td>3</td><td>it is Held, not Failed or CompensationFailed</td></tr>`, "why not")
	require.NotContains(t, body, `id="bulk-confirm"`, "nothing to confirm")
	refusedDryRuns(t, dryRun)

	code, body = dryRun("retry", nil)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `data-listed="3" data-done="3" data-already="0" data-refused="0" data-changed="0" data-left="0"`)
	for _, id := range ids {
		require.Contains(t, body, `<tr data-order="`+id+`" data-outcome="would">`)
	}
	require.Contains(t, body, `<input type="hidden" name="count" value="3">`)
	require.Contains(t, body, `>Retry these 3 orders</button>`)
	plan := planRE.FindStringSubmatch(body)[1]
	require.Equal(t, before, tasks(t, p, ids...), "a dry run writes nothing")

	target, tok := base+"/bulk/"+plan, token(t, base)
	refusedConfirmations(t, base, target, tok)
	require.Equal(t, before, tasks(t, p, ids...), "nothing refused wrote anything")

	_, err := p.op.DecideHeld(t.Context(), outcome.HoldDecision{OrderID: "con-bulk-3", Action: outcome.HoldUndo, By: "someone else"})
	require.NoError(t, err)
	p.sim.SetFaults("payment", remotesim.Faults{}) // the bank answers again
	code, _, h := post(t, target, url.Values{"count": {"3"}, "token": {tok}}, map[string]string{"Origin": base})
	require.Equal(t, http.StatusSeeOther, code)
	code, body = get(t, base+h.Get("Location"))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "retry: 2 of 3 orders done.")
	require.Contains(t, body, `data-listed="3" data-done="2" data-already="0" data-refused="0" data-changed="1" data-left="0"`)
	require.Contains(t, body, `<tr data-order="con-bulk-3" data-outcome="changed">`)
	require.Regexp(t, `changed since listed</td><td>it is (Compensating|Failed), not Held`, body, "undone meanwhile")
	by := regexp.MustCompile(`<code id="bulk-by">(console-test retry \(bulk [0-9T:-]+Z, 3 orders\))</code>`).FindStringSubmatch(body)
	require.NotNil(t, by, body)
	for _, id := range ids[:2] {
		p.waitState(t, id, workflow.Processed)
		_, body = get(t, base+"/orders/"+id)
		require.Contains(t, body, "retried by "+by[1], "its history names the bulk action")
	}
	code, body, _ = post(t, target, url.Values{"count": {"3"}, "token": {tok}}, map[string]string{"Origin": base})
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "was confirmed already")
}

// refusedConfirmations posts confirmations of the dry run at target that
// the console refuses: without the token or with a forged one, from
// another origin, over the dry run's count or with none, of no dry run.
func refusedConfirmations(t *testing.T, base, target, tok string) {
	t.Helper()
	for name, c := range map[string]struct {
		form    url.Values
		headers map[string]string
		code    int
		says    string
	}{
		"no token":     {url.Values{"count": {"3"}}, map[string]string{"Origin": base}, 403, "Bad or missing token"},
		"forged token": {url.Values{"count": {"3"}, "token": {strings.Repeat("0", len(tok))}}, map[string]string{"Origin": base}, 403, "Bad or missing token"},
		"cross-origin": {url.Values{"count": {"3"}, "token": {tok}}, map[string]string{"Origin": "http://evil.example"}, 403, "cross-origin"},
		"over":         {url.Values{"count": {"4"}, "token": {tok}}, map[string]string{"Origin": base}, 409, "The dry run would act on 3 orders; the form confirms &#34;4&#34;"},
		"no count":     {url.Values{"token": {tok}}, map[string]string{"Origin": base}, 409, "Nothing was done"},
		"no plan":      {url.Values{"count": {"3"}, "token": {tok}}, map[string]string{"Origin": base}, 404, "run the dry run again"},
	} {
		to := target
		if name == "no plan" {
			to = base + "/bulk/0123"
		}
		code, body, _ := post(t, to, c.form, c.headers)
		require.Equal(t, c.code, code, "%s: %s", name, body)
		require.Contains(t, body, c.says, name)
	}
}

// refusedDryRuns asks for dry runs the console refuses: an unknown action,
// a skip without its step or with a result that is not JSON, a bad search.
func refusedDryRuns(t *testing.T, dryRun func(action string, more url.Values) (int, string)) {
	t.Helper()
	for _, c := range []struct {
		action string
		more   url.Values
		says   string
	}{
		{"explode", nil, "Unknown action &#34;explode&#34;"},
		{"skip", nil, "names the step it takes as done"},
		{"skip", url.Values{"action-step": {"charge-payment"}, "action-result": {"{nope"}}, "its result is not JSON"},
		{"retry", url.Values{"older": {"soon"}}, "&#34;soon&#34; is not an age"},
	} {
		code, body := dryRun(c.action, c.more)
		require.Equal(t, http.StatusBadRequest, code, c.action)
		require.Contains(t, body, c.says, c.action)
	}
}
