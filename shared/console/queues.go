package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/operator"
)

// peekMax is how many messages of each DLQ, and alerts, a page shows.
const peekMax = 50

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	dlqs, err := s.op.DeadLetters(r.Context(), peekMax)
	if err != nil {
		s.failErr(w, r, "read the dead-letter queues", err)
		return
	}
	s.render(w, r, http.StatusOK, "dlq", view{Title: "Dead-letter queues", Nav: "dlq",
		Data: struct {
			DLQs []operator.DLQ
			Max  int
		}{dlqs, peekMax}})
}

// queueOf checks the short queue name the path gives.
func (s *Server) queueOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	q := r.PathValue("queue")
	if !slices.Contains(s.op.QueueNames(), q) {
		s.fail(w, r, http.StatusNotFound, "No such queue", fmt.Sprintf("There is no queue %q; the queues are %v.", q, s.op.QueueNames()))
		return "", false
	}
	return q, true
}

func (s *Server) confirmRedrive(w http.ResponseWriter, r *http.Request) {
	q, ok := s.queueOf(w, r)
	if !ok {
		return
	}
	full := s.op.Topology.Prefix + "-" + q
	v := confirmView{Heading: fmt.Sprintf("Redrive %s-dlq?", full),
		Detail: fmt.Sprintf("Every message of %s-dlq (up to 1000) is sent back to %s, then deleted from the DLQ. "+
			"A message that fails again returns to the DLQ with its reason.", full, full),
		Action: "/dlq/" + q + "/redrive", Button: "Redrive", Back: "/dlq"}
	s.render(w, r, http.StatusOK, "confirm", view{Title: v.Heading, Nav: "dlq", Data: v})
}

func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	q, ok := s.queueOf(w, r)
	if !ok {
		return
	}
	res, err := s.op.Redrive(r.Context(), q, 1000)
	if err != nil {
		s.failErr(w, r, fmt.Sprintf("redrive %s (moved %d before that)", q, res.Moved), err)
		return
	}
	s.redirect(w, r, "/dlq", fmt.Sprintf("Moved %d messages from %s to %s.", res.Moved, res.From, res.To))
}

// alertsView is the alerts page.
type alertsView struct {
	Inbox  string
	Topic  string
	Found  bool // the inbox exists
	Alerts []alert.Failure
	Max    int
}

func (s *Server) alerts(w http.ResponseWriter, r *http.Request) {
	v := alertsView{Inbox: s.op.AlertInboxName(), Topic: s.op.Topology.AlertTopic(), Found: true, Max: peekMax}
	var err error
	v.Alerts, err = s.op.Alerts(r.Context(), peekMax)
	if errors.Is(err, operator.ErrNoAlertInbox) {
		v.Found, err = false, nil
	}
	if err != nil {
		s.failErr(w, r, "read the alert inbox", err)
		return
	}
	s.render(w, r, http.StatusOK, "alerts", view{Title: "Alerts", Nav: "alerts", Data: v})
}
