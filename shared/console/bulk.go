package console

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// A bulk action from the orders page: the form (GET /bulk, with the list's
// state and search and the action) runs a dry run, which writes nothing,
// shows what it would touch and why not the rest, and keeps the orders it
// would act on as a plan; its confirmation (POST /bulk/{id}, the token and
// the count shown) acts on those orders only, at most that many, paced at
// operator.BulkRate, and the report is shown at /bulk/{id}.

// The bulk form's fields for the action (the search's own step and reason
// are the list's).
const (
	formAction = "action"
	formStep   = "action-step"
	formResult = "action-result"
	formReason = "action-reason"
)

// bulkRows is how many orders a bulk page lists.
const bulkRows = 200

// bulkDryRun serves GET /bulk: the dry run of the form's action on the
// list's orders the search finds, with the confirmation's form.
func (s *Server) bulkDryRun(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, status, why := s.planOf(q)
	if status != 0 {
		s.fail(w, r, status, "Bad bulk action", why)
		return
	}
	act, err := s.op.ActionOf(p.spec)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "Bad bulk action", err.Error()+".")
		return
	}
	sel := s.op.Searched(p.search)
	if p.inFlight {
		sel = s.op.InFlightSearched(p.search)
	}
	dry, err := s.op.Bulk(r.Context(), sel, act, operator.BulkOptions{DryRun: true, By: s.cfg.Who}, nil)
	if err != nil {
		s.failErr(w, r, "dry run of "+p.spec.Name, err)
		return
	}
	p.ids, p.dry = dry.Would(), trimmed(dry)
	if len(p.ids) > 0 && len(p.ids) <= s.cfg.BulkMax {
		p.id = s.plans.put(p)
	}
	s.render(w, r, http.StatusOK, "bulk", view{Title: "Dry run: " + p.spec.Name, Nav: "orders", Data: s.bulkViewOf(*p, p.dry)})
}

// planOf reads the bulk form: the action and what it takes, the list and
// its search; or the status and why it is refused.
func (s *Server) planOf(q url.Values) (*bulkPlan, int, string) {
	p := &bulkPlan{spec: operator.ActionSpec{Name: q.Get(formAction), Step: strings.TrimSpace(q.Get(formStep)),
		Reason: short(strings.TrimSpace(q.Get(formReason)), 200)}}
	if !operator.KnownAction(p.spec.Name) {
		return nil, http.StatusBadRequest, fmt.Sprintf("Unknown action %q: the console acts on many orders with %s.",
			p.spec.Name, strings.Join(operator.ActionNames, ", "))
	}
	if text := strings.TrimSpace(q.Get(formResult)); text != "" {
		p.spec.Result = []byte(text)
	}
	if p.spec.Name == "skip" && p.spec.Step == "" {
		return nil, http.StatusBadRequest, "A skip on many orders names the step it takes as done (one result, typed once, " +
			"is that step's): fill in Step."
	}
	state := cmp.Or(q.Get("state"), inFlightTab)
	if !knownTab(state) {
		return nil, http.StatusBadRequest, fmt.Sprintf("Unknown list %q: the lists are %s.", state, tabNames())
	}
	search, err := operator.SearchOf(q)
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Sprintf("The search is not one the console can run: %s.", err)
	}
	back := search.Query()
	back.Set("state", state)
	p.back, p.inFlight = "/?"+back.Encode(), state == inFlightTab
	if !p.inFlight {
		search.State = workflow.State(state)
	}
	p.search, p.label = search, listLabel(state, search)
	return p, 0, ""
}

// bulkRun serves POST /bulk/{id}: the confirmation of a dry run, which acts
// on the orders it would act on, at most the count the form confirms, then
// shows the report.
func (s *Server) bulkRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, ok := s.plans.get(id)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "No such dry run", noPlan)
		return
	}
	count, err := strconv.Atoi(r.PostFormValue("count"))
	if err != nil || count < 1 || count > len(p.ids) {
		s.fail(w, r, http.StatusConflict, "Refused", fmt.Sprintf("The dry run would act on %d orders; the form confirms %q. "+
			"Nothing was done: run the dry run again and confirm what it lists.", len(p.ids), r.PostFormValue("count")))
		return
	}
	if !s.plans.start(id) {
		s.fail(w, r, http.StatusConflict, "Refused", "This dry run was confirmed already: its report is at /bulk/"+id+
			". Run a dry run again to act on what is left.")
		return
	}
	act, err := s.op.ActionOf(p.spec)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "Bad bulk action", err.Error()+".")
		return
	}
	rep, err := s.op.Bulk(r.Context(), operator.IDs(p.ids...), act, operator.BulkOptions{FromDryRun: true,
		Rate: operator.BulkRate, Limit: count, By: s.cfg.Who}, nil)
	s.census.forget()
	s.plans.done(id, trimmed(rep))
	if err != nil {
		s.failErr(w, r, fmt.Sprintf("%s (the report so far: %d done, %d refused, %d changed since the dry run)",
			p.spec.Name, rep.Done, rep.Refused, rep.Changed), err)
		return
	}
	s.redirect(w, r, "/bulk/"+id, fmt.Sprintf("%s: %d of %d orders done.", p.spec.Name, rep.Done, rep.Listed))
}

// bulkReport serves GET /bulk/{id}: a bulk action's report, or its dry
// run's if it was not confirmed.
func (s *Server) bulkReport(w http.ResponseWriter, r *http.Request) {
	p, ok := s.plans.get(r.PathValue("id"))
	if !ok {
		s.fail(w, r, http.StatusNotFound, "No such bulk action", noPlan)
		return
	}
	rep := p.dry
	if p.report != nil {
		rep = *p.report
	}
	s.render(w, r, http.StatusOK, "bulk", view{Title: "Bulk " + p.spec.Name, Nav: "orders", Data: s.bulkViewOf(p, rep)})
}

// noPlan says why a bulk action is not known.
const noPlan = "The console keeps its last bulk actions while it runs (it restarts with none): run the dry run again " +
	"from the orders page."

// trimmed is rep with at most bulkRows orders, as kept and shown.
func trimmed(rep operator.BulkReport) operator.BulkReport {
	rep.Orders = rep.Orders[:min(len(rep.Orders), bulkRows)]
	return rep
}

// listLabel says which orders a list and its search hold, in words.
func listLabel(state string, s operator.Search) string {
	label := "the orders in flight"
	if state != inFlightTab {
		label = "the " + state + " orders"
	}
	q := s.Query()
	if len(q) == 0 {
		return label
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		parts = append(parts, k+" "+q.Get(k))
	}
	return label + " found by " + strings.Join(parts, ", ")
}

// bulkTime is about how long acting on n orders at operator.BulkRate takes
// (a second at least).
func bulkTime(n int) time.Duration {
	return max(time.Duration(n)*time.Second/operator.BulkRate, time.Second).Round(time.Second)
}

// hiddenField is a form's hidden input.
type hiddenField struct{ Name, Value string }

// BulkFields are the list's state and search, as the bulk form sends them.
func (v listView) BulkFields() []hiddenField {
	q := v.Search.Query()
	q.Set("state", v.State)
	var out []hiddenField
	for _, k := range slices.Sorted(maps.Keys(q)) {
		out = append(out, hiddenField{Name: k, Value: q.Get(k)})
	}
	return out
}

// bulkOption is an action the bulk form offers.
type bulkOption struct {
	Name, Label string
	Selected    bool
}

// BulkActions are the actions the bulk form offers, the one that fits the
// list selected (retry for Held, resubmit for Failed, cancel else).
func (v listView) BulkActions() []bulkOption {
	fits := "cancel"
	switch workflow.State(v.State) {
	case workflow.Held:
		fits = "retry"
	case workflow.Failed, workflow.CompensationFailed:
		fits = "resubmit"
	}
	labels := map[string]string{"retry": "retry the held step", "skip": "skip the held step (Step, Result)",
		"undo": "undo the held order", "cancel": "cancel (Reason)", "resubmit": "resubmit"}
	var out []bulkOption
	for _, name := range operator.ActionNames {
		out = append(out, bulkOption{Name: name, Label: labels[name], Selected: name == fits})
	}
	return out
}
