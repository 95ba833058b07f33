package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// healthStates are the end states the health page has a column for.
var healthStates = []workflow.State{workflow.Processed, workflow.Failed, workflow.CompensationFailed, workflow.Cancelled}

// healthView is the health page: each workflow version's figures.
type healthView struct {
	At        time.Time
	States    []workflow.State
	Workflows []operator.WorkflowHealth
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	hs, err := s.op.Health(r.Context(), now)
	if err != nil {
		s.failErr(w, r, "read the workflows' health", err)
		return
	}
	s.render(w, r, http.StatusOK, "health", view{Title: "Health", Nav: "health",
		Data: healthView{At: now.UTC(), States: healthStates, Workflows: hs}})
}

// percent is a rate as a percentage, one decimal.
func percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// window is one row of a workflow version's figures.
type window struct {
	Label, Name string
	operator.Figures
}

// windows are h's rows: the last hour's, then the last day's.
func windows(h operator.WorkflowHealth) []window {
	return []window{{"hour", "Last hour", h.Hour}, {"day", "Last day", h.Day}}
}
