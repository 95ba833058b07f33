package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// orderView is an order's page.
type orderView struct {
	operator.Status
	Path        string // the order's page
	Graph       graph
	Fall        waterfall // its records on one time axis
	Messages    []statusMessage
	Ended       bool
	CanResubmit bool
	CanCancel   bool
	Held        bool // a step's failure holds it for its operator: retry, skip, undo
	// MoveTo is the version of its workflow the deployment runs, when the
	// order runs another and may move to it (sasctl migrate).
	MoveTo string
	// Events are the events the order's steps wait for, while it runs (the
	// signal form's); Awaited the one a step waits for now.
	Events  []string
	Awaited string
}

func (s *Server) order(w http.ResponseWriter, r *http.Request) {
	st, ok := s.status(w, r)
	if !ok {
		return
	}
	v := orderView{Status: st, Path: orderPath(st.Order.OrderID), Graph: layoutOf(st), Fall: waterfallOf(st, time.Now()),
		Messages:    statusMessages(st),
		Ended:       st.Order.State.Ended(),
		CanResubmit: st.Order.State == workflow.Failed || st.Order.State == workflow.CompensationFailed,
		CanCancel:   !st.Order.State.Ended() && st.Order.CancelledBy == "",
		MoveTo:      s.moveTo(st),
		Held:        st.Order.State == workflow.Held}
	for _, r := range st.Records {
		if r.Kind == string(workflow.KindEvent) && !v.Ended {
			v.Events = append(v.Events, r.Event)
		}
		if w := r.Waiting; w != nil && w.For == string(workflow.KindEvent) {
			v.Awaited = w.Event
		}
	}
	s.render(w, r, http.StatusOK, "order", view{Title: "Order " + st.Order.OrderID, Nav: "orders", Data: v})
}

// status reads the order the path names, or writes the error page.
func (s *Server) status(w http.ResponseWriter, r *http.Request) (operator.Status, bool) {
	id := r.PathValue("id")
	st, err := s.op.Status(r.Context(), id)
	if errors.Is(err, statestore.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, "No such order", fmt.Sprintf("There is no order %q in this deployment (%s).",
			id, s.op.Topology.StateTable()))
		return st, false
	}
	if err != nil {
		s.failErr(w, r, "read order "+id, err)
		return st, false
	}
	return st, true
}

func orderPath(id string) string { return "/orders/" + url.PathEscape(id) }

// confirmView is a confirmation page: what the action will do, and the
// form that does it.
type confirmView struct {
	Heading string
	Detail  string
	Action  string // the form's target
	Button  string
	Back    string
	Reason  bool // ask for a reason
	Result  bool // ask for a held step's result (skip)
	// Steps are the held records to choose from, when more than one holds
	// the order.
	Steps []string
}

// confirmations say what an action will do to the order, in words.
func confirmation(action string, st operator.Status) (heading, detail, button string, ok bool) {
	id := st.Order.OrderID
	switch action {
	case "resubmit":
		detail = "Only a Failed or CompensationFailed order can be resubmitted; this one is " + string(st.Order.State) + "."
		switch st.Order.State {
		case workflow.Failed:
			detail = "Its completed steps were undone, so it runs again from its first step in a new round " +
				"(new idempotency keys), and its request is sent to its Agent."
		case workflow.CompensationFailed:
			detail = fmt.Sprintf("Its record in Error (%s) runs again with its failure count reset, and its request is sent to its Agent: "+
				"a failed undo action is retried and compensation goes on; a step without an undo action that timed out "+
				"runs again with the same idempotency key.", inError(st))
		}
		return "Resubmit order " + id + "?", detail, "Resubmit", true
	case "cancel":
		return "Cancel order " + id + "?", "What has not started will not; a step that is running is awaited; " +
				"the steps that completed are undone in reverse order, and the order ends Cancelled. This cannot be taken back.",
			"Cancel the order", true
	case "retry":
		return "Retry the held step of order " + id + "?", "The step whose failure holds the order runs again, a new attempt with " +
			"its failure count reset and the same idempotency key; the order goes on where it stood.", "Retry the step", true
	case "skip":
		return "Skip the held step of order " + id + "?", "The step whose failure holds the order is taken as done, with the " +
				"result you give (JSON: what its service would have answered; empty: null), and the order goes on as if it had " +
				"answered. Its undo runs if the order is undone later.",
			"Skip the step", true
	case "undo":
		return "Undo held order " + id + "?", "What completed is undone, the latest first, and the order ends Failed, as its " +
			"step's failure would have done. This cannot be taken back.", "Undo the order", true
	case "move":
		return "Move order " + id + " to the version the deployment runs?", "", "Move the order", true
	}
	return "", "", "", false
}

// moveTo is the version of the order's workflow the deployment runs, if
// the order runs another, in flight ("": none, or the workflows are not
// known).
func (s *Server) moveTo(st operator.Status) string {
	d, ok := s.op.Workflows.Get(st.Order.Workflow)
	if !ok || st.Order.Workflow == "" || d.Version == st.Order.Version || st.Order.State.Ended() {
		return ""
	}
	return d.Version
}

// moveDetail is what moving the order to to does, from a dry run.
func moveDetail(m operator.Migrated) string {
	switch {
	case m.Already:
		return "It runs version " + m.To + " already."
	case !m.Moves:
		return "It cannot move now: " + m.Why + "."
	}
	parts := []string{fmt.Sprintf("It moves from version %s to %s in one write", m.From, m.To)}
	if m.Base != "" {
		parts[0] += fmt.Sprintf(" (a form of %s keeping the undo its steps ran with)", m.Base)
	}
	parts = append(parts, m.Effects()...)
	return strings.Join(parts, "; ") + ". What ran keeps its state and its result; a wait keeps its deadline."
}

// heldSteps are the names of the records that hold the order.
func heldSteps(st operator.Status) []string {
	var out []string
	for _, rec := range st.Records {
		if st.Order.State == workflow.Held && !rec.Undo && rec.State == workflow.Error {
			out = append(out, rec.Name)
		}
	}
	return out
}

func inError(st operator.Status) string {
	for _, rec := range st.Records {
		if rec.State == workflow.Error {
			return rec.Name
		}
	}
	return "none"
}

func (s *Server) confirmOrder(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if _, _, _, ok := confirmation(action, operator.Status{}); !ok {
		s.fail(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("An order has no action %q (resubmit, cancel, retry, skip, undo, move).", action))
		return
	}
	st, ok := s.status(w, r)
	if !ok {
		return
	}
	heading, detail, button, _ := confirmation(action, st)
	id := st.Order.OrderID
	v := confirmView{Heading: heading, Detail: detail, Button: button, Action: orderPath(id) + "/" + action,
		Back: orderPath(id), Reason: action == "cancel", Result: action == "skip"}
	if action == "retry" || action == "skip" {
		v.Steps = heldSteps(st)
	}
	if action == "move" {
		to, ok := s.op.Workflows.Get(st.Order.Workflow)
		if !ok {
			s.fail(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("The console was not told workflow %q (--workflows).", st.Order.Workflow))
			return
		}
		dry, err := s.op.MigrateOrder(r.Context(), id, to, s.cfg.Who, true)
		if err != nil {
			s.failErr(w, r, "dry run of the move of "+id, err)
			return
		}
		v.Heading = fmt.Sprintf("Move order %s to version %s?", id, to.Version)
		v.Detail = moveDetail(dry)
	}
	s.render(w, r, http.StatusOK, "confirm", view{Title: v.Heading, Nav: "orders", Data: v})
}

// actOnOrder takes a confirmed action (the form of confirmOrder's page),
// then redirects to the order's page with the result.
func (s *Server) actOnOrder(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	result, err := s.act(r, id, action)
	switch {
	case errors.Is(err, errNoAction):
		s.fail(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("An order has no action %q (resubmit, cancel, signal, retry, skip, undo).", action))
	case errors.Is(err, operator.ErrBadSignal):
		s.fail(w, r, http.StatusBadRequest, "Not sent", fmt.Sprintf("Order %s: %s.", id, err))
	case errors.Is(err, statestore.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "No such order", fmt.Sprintf("There is no order %q in this deployment.", id))
	case statestore.IsNotResubmittable(err) || statestore.IsNotCancellable(err) || outcome.IsHeldError(err):
		s.fail(w, r, http.StatusConflict, "Refused", fmt.Sprintf("Order %s: %s.", id, err))
	case err != nil:
		s.failErr(w, r, action+" order "+id, err)
	default:
		s.census.forget()
		s.redirect(w, r, orderPath(id), result)
	}
}

// errNoAction means the path names no action an order has.
var errNoAction = errors.New("no such action")

// act resubmits, cancels or sends an event to the order with sasctl's
// operator code, and says what it did.
func (s *Server) act(r *http.Request, id, action string) (string, error) {
	switch action {
	case "resubmit":
		res, err := s.op.Resubmit(r.Context(), id, "")
		if err != nil {
			return "", err
		}
		what := "step " + res.Step
		if res.Undo {
			what = "undo action " + res.Step
		}
		return fmt.Sprintf("Resubmitted: %s is Pending again (round %d); its request was sent.", what, res.Round), nil
	case "cancel":
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		res, err := s.op.Cancel(r.Context(), id, s.cfg.Who, short(reason, 200))
		if err != nil {
			return "", err
		}
		return "Cancel accepted: " + res.What + ".", nil
	case "signal":
		return s.signal(r, id)
	case "retry", "skip", "undo":
		return s.decideHeld(r, id, outcome.HoldAction(action))
	case "move":
		return s.move(r, id)
	}
	return "", errNoAction
}

// move moves the order to the version of its workflow the deployment runs.
func (s *Server) move(r *http.Request, id string) (string, error) {
	st, err := s.op.Status(r.Context(), id)
	if err != nil {
		return "", err
	}
	to, ok := s.op.Workflows.Get(st.Order.Workflow)
	if !ok {
		return "", errNoAction
	}
	m, err := s.op.MigrateOrder(r.Context(), id, to, s.cfg.Who, false)
	if err != nil {
		return "", err
	}
	if !m.Moves {
		return "Not moved. " + moveDetail(m), nil
	}
	return strings.Replace(moveDetail(m), "It moves", "Moved", 1), nil
}

// decideHeld takes the operator's decision on a held order.
func (s *Server) decideHeld(r *http.Request, id string, action outcome.HoldAction) (string, error) {
	d := outcome.HoldDecision{OrderID: id, Action: action, Step: r.PostFormValue("step"), By: s.cfg.Who}
	if text := strings.TrimSpace(r.PostFormValue("result")); text != "" {
		if !message.ValidJSON([]byte(text)) {
			return "", &workflow.HeldError{Reason: operator.ResultNotJSON + ": " + short(text, 60)}
		}
		d.Result = json.RawMessage(text)
	}
	res, err := s.op.DecideHeld(r.Context(), d)
	if err != nil {
		return "", err
	}
	switch action {
	case outcome.HoldRetry:
		return fmt.Sprintf("Step %s runs again; the order is %s.", res.Step, res.State), nil
	case outcome.HoldSkip:
		return fmt.Sprintf("Step %s taken as done; the order is %s.", res.Step, res.State), nil
	}
	return fmt.Sprintf("The order is being undone; it is %s.", res.State), nil
}

// signal sends the signal form's event to the order.
func (s *Server) signal(r *http.Request, id string) (string, error) {
	var data json.RawMessage
	if text := strings.TrimSpace(r.PostFormValue("data")); text != "" {
		if !json.Valid([]byte(text)) {
			return "", fmt.Errorf("%w: its data is not JSON: %s", operator.ErrBadSignal, short(text, 60))
		}
		data = json.RawMessage(text)
	}
	res, err := s.op.Signal(r.Context(), id, r.PostFormValue("event"), strings.TrimSpace(r.PostFormValue("eventId")), data, false)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Sent event %s (eventId %s) to the events queue: the step waiting for it takes its data, "+
		"or the order keeps it until it gets there.", res.Event, res.EventID), nil
}
