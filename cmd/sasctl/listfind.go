package main

import (
	"slices"

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
	cmd.Flags().StringVar(&search.Step, "step", "", "only orders at this step (at work, waiting, or failed there)")
	queryFlags(cmd, search, more)
}

// queryFlags are findFlags but --step and those of except, which an
// action takes for something of its own (retry, skip, undo and resubmit:
// --step, the step they act on; cancel: --reason, why).
func queryFlags(cmd *cobra.Command, search *operator.Search, more *moreFlags, except ...string) {
	f := cmd.Flags()
	for _, fl := range []struct {
		name, usage string
		to          *string
	}{
		{"version", "only orders running this version of their workflow", &search.Version},
		{"agent", "only orders at a step of this agent", &search.Agent},
		{"reason", "only orders failed or waiting for this reason: timeout, refused, oversized, pause, line, rate, 503, or text", &search.Reason},
		{"ended-after", "only orders ended after this: a time (2026-12-07T10:00:00Z) or an age (1h: an hour ago)", &more.endedAfter},
		{"ended-before", "only orders ended before this: a time or an age", &more.endedBefore},
		{"field", "only orders whose searchable field (the workflow's search:) has this value: name=value", &more.field},
	} {
		if !slices.Contains(except, fl.name) {
			f.StringVar(fl.to, fl.name, "", fl.usage)
		}
	}
	f.BoolVar(&search.Scan, "scan", false, "scan the state table whatever index could answer: finds the orders that ended before the deployment had its end index too")
}
