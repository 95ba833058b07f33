package console_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// An order that waits for an event shows what for, since when and until
// when, and takes the event from the form on its page; once Processed, its
// undo actions are not needed, and its page says so.
func TestAWaitingOrderTakesAnEventFromItsPage(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	require.NoError(t, p.stack.SendOrders(t.Context(), approvalOrder("wait-1")))
	p.waitParked(t, "wait-1", 1)
	code, body := get(t, base+"/orders/wait-1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<g class="box st-Pending waiting" data-name="await-approval" data-state="Pending" data-waiting="event">`)
	require.Regexp(t, `<td class="waiting">event &#34;approved&#34; since [0-9-]+ [0-9:]+Z, until [0-9-]+ [0-9:]+Z</td>`, body, "the records table")
	require.Regexp(t, `<text [^>]+>waits since [0-9:.]+</text><text [^>]+>until [0-9]{2}-[0-9]{2} [0-9:]+</text>`, body,
		"the box: since a time of day, until a day three days later")
	require.Regexp(t, `<td>await-approval</td><td>waits for event &#34;approved&#34; until \S+</td>`, body, "the timeline")
	require.Contains(t, body, `<option selected>approved</option>`, "the form offers the event the order waits for")

	origin := map[string]string{"Origin": base}
	for data, says := range map[string]string{`{amountCents: 1}`: "its data is not JSON", `"x"`: "must be 1-64 letters"} {
		form := url.Values{"token": {token(t, base)}, "event": {"not allowed!"}, "data": {data}}
		code, body, _ := post(t, base+"/orders/wait-1/signal", form, origin)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, body, says)
		require.Contains(t, body, "Not sent")
	}
	form := url.Values{"token": {token(t, base)}, "event": {"approved"}, "data": {`{"amountCents": 1998, "by": "ana"}`}, "eventId": {"web-e-1"}}
	code, body, h := post(t, base+"/orders/wait-1/signal", form, origin)
	require.Equal(t, http.StatusSeeOther, code, body)
	_, body = get(t, base+h.Get("Location"))
	require.Contains(t, body, "Sent event approved (eventId web-e-1) to the events queue")
	p.waitState(t, "wait-1", workflow.Processed)
	_, body = get(t, base+"/orders/wait-1")
	require.Contains(t, body, `data-name="refund-approved" data-state="NotNeeded"`)
	require.Contains(t, body, `data-name="release-inventory" data-state="NotNeeded"`)
	require.NotContains(t, body, `id="signal"`, "an ended order takes no event")
}
