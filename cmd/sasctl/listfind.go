package main

import (
	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
)

// moreFlags are list's flags read into a search by apply: the end times
// and the searchable field, as written.
type moreFlags struct {
	endedAfter, endedBefore, field string
}

// apply reads the flags into search: a usage error naming the flag if one
// cannot be read.
func (m moreFlags) apply(search *operator.Search) error {
	for _, e := range []struct {
		flag, v string
		to      *operator.Moment
	}{{"--ended-after", m.endedAfter, &search.EndedAfter}, {"--ended-before", m.endedBefore, &search.EndedBefore}} {
		if e.v == "" {
			continue
		}
		at, err := operator.ParseMoment(e.v)
		if err != nil {
			return usageErrorf("%s: %v", e.flag, err)
		}
		*e.to = at
	}
	if m.field != "" {
		field, value, err := operator.ParseField(m.field)
		if err != nil {
			return usageErrorf("--field: %v", err)
		}
		search.Field, search.Value = field, value
	}
	return nil
}

// findFlags declares list's flags that find orders by where they are and
// by a searchable field.
func findFlags(cmd *cobra.Command, search *operator.Search, more *moreFlags) {
	f := cmd.Flags()
	f.StringVar(&search.Version, "version", "", "only orders running this version of their workflow")
	f.StringVar(&search.Step, "step", "", "only orders at this step (at work, waiting, or failed there)")
	f.StringVar(&search.Agent, "agent", "", "only orders at a step of this agent")
	f.StringVar(&search.Reason, "reason", "", "only orders failed or waiting for this reason: timeout, refused, oversized, pause, line, rate, 503, or text")
	f.StringVar(&more.endedAfter, "ended-after", "", "only orders ended after this: a time (2026-12-07T10:00:00Z) or an age (1h: an hour ago)")
	f.StringVar(&more.endedBefore, "ended-before", "", "only orders ended before this: a time or an age")
	f.StringVar(&more.field, "field", "", "only orders whose searchable field (the workflow's search:) has this value: name=value")
}
