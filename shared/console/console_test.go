package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/console"
	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

var tokenRE = regexp.MustCompile(`name="token" value="([0-9a-f]+)"`)

// token reads the process's token from a page with a form, as a browser
// would have it.
func token(t *testing.T, base string) string {
	t.Helper()
	code, body := get(t, base+"/dlq/orders/redrive")
	require.Equal(t, http.StatusOK, code, body)
	m := tokenRE.FindStringSubmatch(body)
	require.NotNil(t, m, "a confirmation page embeds the token")
	return m[1]
}

// post sends a form with the given headers and returns the status and body.
func post(t *testing.T, target string, form url.Values, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func TestBadInputGetsAClearAnswer(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	for path, want := range map[string]struct {
		code int
		says string
	}{
		"/orders/no-such-order":            {404, `There is no order &#34;no-such-order&#34;`},
		"/orders/%3Cscript%3Ex":            {404, `&lt;script&gt;x`},
		"/?state=Failed&next=garbage":      {400, `bad page token &#34;garbage&#34;`},
		"/?state=inflight&next=e30x!":      {400, `bad page token`},
		"/?state=Exploded":                 {400, `Unknown list &#34;Exploded&#34;`},
		"/orders/no-such-order/resubmit":   {404, `There is no order`},
		"/orders/no-such-order/explode":    {404, `An order has no action &#34;explode&#34;`},
		"/dlq/nowhere/redrive":             {404, `There is no queue &#34;nowhere&#34;`},
		"/faults":                          {404, `faults are changed only under`},
		"/nothing/here":                    {404, `There is no page /nothing/here`},
		"/static/console.js":               {200, `data-live`},
		"/?state=Processed":                {200, `What a refresh costs`},
		"/?state=Failed&older=soon":        {400, `&#34;soon&#34; is not an age`},
		"/?older=1h&newer=10m":             {400, `no order is older than 1h and newer than 10m`},
		"/?state=Failed&prefix=x&newer=2d": {200, `What a search costs`},
		"/alerts":                          {200, p.op.AlertInboxName()},
		"/dlq":                             {200, p.op.Topology.OrdersQueue().DLQName},
	} {
		code, body := get(t, base+path)
		require.Equal(t, want.code, code, "%s: %s", path, body)
		require.Contains(t, body, want.says, path)
		require.NotContains(t, body, "<script>x", path)
	}
}

func TestActionsNeedTheTokenAndTheConsolesOrigin(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	tok := token(t, base)
	target := base + "/orders/no-such-order/cancel"
	good := url.Values{"token": {tok}}
	for name, c := range map[string]struct {
		form    url.Values
		headers map[string]string
		code    int
		says    string
	}{
		"no token":          {url.Values{}, map[string]string{"Origin": base}, 403, "Bad or missing token"},
		"another token":     {url.Values{"token": {strings.Repeat("0", len(tok))}}, map[string]string{"Origin": base}, 403, "Bad or missing token"},
		"cross-origin":      {good, map[string]string{"Origin": "http://evil.example"}, 403, "Refused a cross-origin request: it came from http://evil.example"},
		"null origin":       {good, map[string]string{"Origin": "null"}, 403, "cross-origin"},
		"foreign referer":   {good, map[string]string{"Referer": "http://evil.example/page"}, 403, "its Referer is not a page of this console"},
		"neither header":    {good, nil, 403, "neither an Origin nor a Referer"},
		"same origin":       {good, map[string]string{"Origin": base}, 404, "There is no order"},
		"same-site referer": {good, map[string]string{"Referer": base + "/orders/no-such-order/cancel"}, 404, "There is no order"},
	} {
		code, body, _ := post(t, target, c.form, c.headers)
		require.Equal(t, c.code, code, "%s: %s", name, body)
		require.Contains(t, body, c.says, name)
	}
}

func TestOnlyItsOwnAddressIsServed(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	req, err := http.NewRequest(http.MethodGet, base+"/", nil)
	require.NoError(t, err)
	req.Host = "rebound.example:80" // a page whose name was rebound to 127.0.0.1
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	for _, addr := range []string{"0.0.0.0:0", ":0", "192.168.1.10:8080", "[::]:0"} {
		_, err := console.Listen(addr)
		require.ErrorContains(t, err, "127.0.0.1 only", addr)
	}
	l, err := console.Listen("localhost:0")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(console.URL(l), "http://127.0.0.1:"))
	require.NoError(t, l.Close())
}

func TestDeadLettersShowTheirReasonAndRedrive(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	require.NoError(t, p.stack.SendOrders(t.Context(), `{"orderId":"dlq-1","items":[]}`))
	require.Eventually(t, func() bool {
		_, body := get(t, base+"/dlq")
		return strings.Contains(body, `the order: missing property &#39;customerId&#39;`)
	}, 60*time.Second, 200*time.Millisecond, "the rejected order shows in the orders DLQ with its reason")
	_, body := get(t, base+"/dlq")
	require.Contains(t, body, `{&#34;orderId&#34;:&#34;dlq-1&#34;,&#34;items&#34;:[]}`)

	code, _, h := post(t, base+"/dlq/orders/redrive", url.Values{"token": {token(t, base)}}, map[string]string{"Origin": base})
	require.Equal(t, http.StatusSeeOther, code)
	code, body = get(t, base+h.Get("Location"))
	require.Equal(t, http.StatusOK, code)
	require.Regexp(t, `Moved [1-9]\d* messages from \S+-orders-dlq to \S+-orders`, body)
}

func TestFaultsCanBeChangedFromTheConsole(t *testing.T) {
	p := thePipeline(t)
	sim := remotesim.New(1) // not the pipeline's: these faults change nothing else
	base := serve(t, p, sim)
	form := url.Values{"token": {token(t, base)}, "transient": {"30%"}, "latency": {"200ms"},
		"outage-service": {"payment"}, "outage-for": {"2m"}}
	code, body, h := post(t, base+"/faults", form, map[string]string{"Origin": base})
	require.Equal(t, http.StatusSeeOther, code, body)
	require.Equal(t, 0.3, sim.AllFaults()[""].TransientRate)
	require.Len(t, sim.AllFaults()["payment"].Outages, 1)
	_, body = get(t, base+h.Get("Location"))
	require.Contains(t, body, "Faults changed.")
	require.Contains(t, body, "30% transient 503s, 200ms latency")

	form = url.Values{"token": {token(t, base)}, "transient": {"lots"}}
	code, body, _ = post(t, base+"/faults", form, map[string]string{"Origin": base})
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "transient: &#34;lots&#34; is not a number")

	form = url.Values{"token": {token(t, base)}, "clear": {"1"}}
	code, _, _ = post(t, base+"/faults", form, map[string]string{"Origin": base})
	require.Equal(t, http.StatusSeeOther, code)
	require.Empty(t, sim.AllFaults())
}

func TestInFlightOrdersAreListedAndTheirPageShowsTheGraph(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	p.sim.SetFaults("inventory/reserve-inventory", remotesim.Faults{StallOrders: []string{"inflight-1"}})
	t.Cleanup(func() { p.sim.SetFaults("inventory/reserve-inventory", remotesim.Faults{}) })
	require.NoError(t, p.stack.SendOrders(t.Context(), `{"orderId":"inflight-1","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":100}]}`))
	require.Eventually(t, func() bool {
		_, body := get(t, base+"/?partial=1")
		return strings.Contains(body, `data-order="inflight-1"`)
	}, 60*time.Second, 200*time.Millisecond, "listed in flight, from the index")
	code, body := get(t, base+"/orders/inflight-1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `data-live="1"`, "an order in flight refreshes")
	require.Contains(t, body, `data-name="reserve-inventory"`)
	require.Contains(t, body, `<g class="box st-Pending idle" data-name="create-shipment" data-state="Pending">`)
	require.Contains(t, body, `id="cancel"`)
	require.Contains(t, body, `<svg id="waterfall"`)
	require.Contains(t, body, `<g class="fall" data-record="reserve-inventory">`, "the running step on the time axis")
	require.NotContains(t, body, `<g class="fall" data-record="create-shipment">`, "a step never made ready is not")

	code, body, h := post(t, base+"/orders/inflight-1/cancel", url.Values{"token": {token(t, base)}, "reason": {"test"}},
		map[string]string{"Origin": base})
	require.Equal(t, http.StatusSeeOther, code, body)
	_, body = get(t, base+h.Get("Location"))
	require.Contains(t, body, "Cancel accepted:")
	require.Contains(t, body, "console-test")
	p.sim.SetFaults("inventory/reserve-inventory", remotesim.Faults{})
	require.Eventually(t, func() bool {
		task, _, err := p.stack.Store.Load(t.Context(), "inflight-1")
		return err == nil && task.State.Ended()
	}, 90*time.Second, 200*time.Millisecond, "the cancelled order ends")
}

// The live list of orders in flight, refreshed every few seconds, reads the
// deadline index and the orders listed, never the whole table: only opening a
// list scans (for the ended states' counts), at most once every CensusEvery;
// a list of Failed orders reads the end index.
func TestLiveRefreshReadsTheIndexNotTheTable(t *testing.T) {
	p := thePipeline(t)
	meter := accounting.NewForDynamoDBLocal()
	c, err := awsclient.Load(t.Context(), awsclient.Options{Endpoint: motoEndpoint, DynamoDBEndpoint: dynamodbEndpoint,
		Emulated: true, APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
	require.NoError(t, err)
	metered := &pipeline{stack: p.stack, sim: p.sim, op: operator.New(c, p.stack.Topology())}
	base := serve(t, metered, nil)
	ids := []string{"cost-1", "cost-2", "cost-3"}
	p.sim.SetFaults("inventory/reserve-inventory", remotesim.Faults{StallOrders: ids}) // they stay in flight
	t.Cleanup(func() { p.sim.SetFaults("inventory/reserve-inventory", remotesim.Faults{}) })
	for i, id := range ids {
		require.NoError(t, p.stack.SendOrders(t.Context(), localrun.DemoOrder(id, i).JSON()))
	}
	require.Eventually(t, func() bool {
		_, body := get(t, base+"/?partial=1")
		return strings.Contains(body, `data-order="cost-3"`) && strings.Contains(body, `data-order="cost-1"`)
	}, 60*time.Second, 200*time.Millisecond, "listed in flight")
	meter.Reset()

	code, body := get(t, base+"/")
	require.Equal(t, http.StatusOK, code, body)
	code, body = get(t, base+"/?state=Failed")
	require.Equal(t, http.StatusOK, code, body)
	// The Failed list reads the end index for its page (no scan); the
	// counts scan once for both.
	require.Equal(t, int64(1), calls(meter, "Scan"), "opening two lists counts once, and a Failed page scans nothing")
	meter.Reset()
	for range 5 {
		code, body = get(t, base+"/?partial=1")
		require.Equal(t, http.StatusOK, code, body)
	}
	require.Zero(t, calls(meter, "Scan"), "a live refresh never scans")
	shards := int64(p.stack.Topology().DeadlineShards)
	require.GreaterOrEqual(t, calls(meter, "Query"), 5*shards, "it counts and lists from the index, shard by shard")
	require.Equal(t, int64(5), calls(meter, "BatchGetItem"), "then reads the orders listed, at once")
	var units float64
	for k, u := range meter.Snapshot() {
		units += u.ReadUnits
		t.Logf("5 refreshes: %s %s: %d requests, %.1f read units", k.Service, k.Operation, u.Requests, u.ReadUnits)
	}
	t.Logf("a refresh of the in-flight list: %.1f read units", units/5)
}

// calls is how many requests of the operation the meter counted.
func calls(m *accounting.Meter, op string) int64 {
	var n int64
	for k, u := range m.Snapshot() {
		if k.Operation == op {
			n += u.Requests
		}
	}
	return n
}

// An order a failed step holds: its page says so and offers retry, skip
// and undo; skip asks for the step's result, and the order goes on with it.
func TestAHeldOrderIsRetriedSkippedOrUndoneFromTheConsole(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	ids := []string{"con-hold-1", "con-hold-2"}
	p.sim.SetFaults("payment", remotesim.Faults{PermanentOrders: ids})
	t.Cleanup(func() { p.sim.SetFaults("payment", remotesim.Faults{}) })
	for _, id := range ids {
		o := localrun.DemoOrder(id, 1)
		o.Workflow = "order-hold"
		require.NoError(t, p.stack.SendOrders(t.Context(), o.JSON()))
	}
	for _, id := range ids {
		p.waitState(t, id, workflow.Held)
	}
	_, body := get(t, base+"/orders/con-hold-1")
	require.Contains(t, body, "Held for its operator")
	for _, a := range []string{"retry", "skip", "undo"} {
		require.Contains(t, body, `id="`+a+`" href="/orders/con-hold-1/`+a+`"`)
	}
	_, body = get(t, base+"/?state=Held")
	require.Contains(t, body, "con-hold-1", "the Held tab lists it")
	code, body := get(t, base+"/orders/con-hold-1/skip")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `name="result"`)

	tok, origin := token(t, base), map[string]string{"Origin": base}
	code, body, _ = post(t, base+"/orders/con-hold-1/skip", url.Values{"token": {tok}, "result": {"{nope"}}, origin)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "its result is not JSON")
	code, _, h := post(t, base+"/orders/con-hold-1/skip", url.Values{"token": {tok}, "result": {`{"charged":"by phone"}`}}, origin)
	require.Equal(t, http.StatusSeeOther, code)
	_, body = get(t, base+h.Get("Location"))
	require.Contains(t, body, "Step charge-payment taken as done; the order is Pending.")
	code, _, h = post(t, base+"/orders/con-hold-2/undo", url.Values{"token": {tok}}, origin)
	require.Equal(t, http.StatusSeeOther, code)
	_, body = get(t, base+h.Get("Location"))
	require.Contains(t, body, "The order is being undone")
	p.waitState(t, "con-hold-1", workflow.Processed)
	p.waitState(t, "con-hold-2", workflow.Failed)
	code, body, _ = post(t, base+"/orders/con-hold-2/retry", url.Values{"token": {tok}}, origin)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "is Failed, not held")
}

// The agents page shows each agent's flow control and pauses and resumes
// it, as sasctl agent does.
func TestAnAgentIsPausedAndResumedFromTheConsole(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	_, body := get(t, base+"/agents")
	for _, a := range []string{"inventory", "payment", "shipping"} {
		require.Contains(t, body, `data-agent="`+a+`"`)
	}
	require.Contains(t, body, `id="pause-shipping"`)
	tok, origin := token(t, base), map[string]string{"Origin": base}
	code, _, h := post(t, base+"/agents/shipping/pause", url.Values{"token": {tok}}, origin)
	require.Equal(t, http.StatusSeeOther, code)
	t.Cleanup(func() { _, _ = p.op.ResumeAgent(context.Background(), "shipping") })
	_, body = get(t, base+h.Get("Location"))
	require.Contains(t, body, "Agent shipping paused")
	require.Contains(t, body, "by console-test since")
	require.Contains(t, body, `id="resume-shipping"`)
	f, err := p.op.AgentFlow(t.Context(), "shipping")
	require.NoError(t, err)
	require.True(t, f.Paused)
	// An order whose shipment is ready while its agent is paused waits, and
	// is listed so (here and in sasctl list), not as failing. (An Agent
	// instance answers from a control at most flow.MaxStale old: the order
	// goes once every instance knows of the pause.)
	time.Sleep(flow.MaxStale)
	require.NoError(t, p.stack.SendOrders(t.Context(), localrun.DemoOrder("paused-1", 1).JSON()))
	waiting := regexp.MustCompile(`(?s)data-order="paused-1">.*?<td class="waiting">agent shipping is paused \(by console-test\)</td>\s*<td class="err"></td>`)
	require.Eventually(t, func() bool { _, body := get(t, base+"/"); return waiting.MatchString(body) }, 60*time.Second,
		200*time.Millisecond, "the orders page shows the order waiting for its paused agent")
	listed, _, err := p.op.List(t.Context(), operator.Search{Prefix: "paused-1"}, 10, "")
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, 1, listed[0].FlowWaiting)
	require.Equal(t, "agent shipping is paused (by console-test)", listed[0].FlowWhy)
	require.Empty(t, listed[0].LastError)
	code, _, h = post(t, base+"/agents/shipping/resume", url.Values{"token": {tok}}, origin)
	require.Equal(t, http.StatusSeeOther, code)
	_, body = get(t, base+h.Get("Location"))
	require.Contains(t, body, "Agent shipping resumed")
	p.waitState(t, "paused-1", workflow.Processed) // its shipment goes on
	code, body, _ = post(t, base+"/agents/shipping/stop", url.Values{"token": {tok}}, origin)
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "An agent has no action")
}
