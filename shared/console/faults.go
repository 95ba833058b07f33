package console

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// faultRow is one service's faults, in words.
type faultRow struct{ Key, What string }

// faults serves the faults page: the simulator's faults, and the form that
// changes them.
func (s *Server) faults(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Faults == nil {
		s.noFaults(w, r)
		return
	}
	all := s.cfg.Faults.DescribeAll(time.Now())
	var rows []faultRow
	for _, k := range slices.Sorted(maps.Keys(all)) {
		key := k
		if key == "" {
			key = "every service"
		}
		rows = append(rows, faultRow{Key: key, What: all[k]})
	}
	s.render(w, r, http.StatusOK, "faults", view{Title: "Faults", Nav: "faults", Data: struct {
		Rows   []faultRow
		Agents []string
	}{rows, s.op.Topology.Agents}})
}

func (s *Server) noFaults(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotFound, "No remote simulator",
		"This console watches a deployment whose remote services are real: faults are changed only under `sasctl dev`.")
}

// changeFaults applies the faults form (the same change as sasctl dev faults).
func (s *Server) changeFaults(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Faults == nil {
		s.noFaults(w, r)
		return
	}
	err := r.ParseForm()
	if err == nil {
		err = s.cfg.Faults.ApplyForm(r.PostForm, time.Now())
	}
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "Bad faults", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	s.redirect(w, r, "/faults", "Faults changed.")
}
