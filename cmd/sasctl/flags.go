package main

import (
	"fmt"
	"strings"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/workflow"
)

// listFlag is a flag given several times, or once with commas.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value.
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// loadWorkflows sets a local stack's workflows from --workflows files,
// validated as at synth and at a Lambda's cold start (none: the example
// order workflow).
func loadWorkflows(o *localrun.Options, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	set, err := workflow.LoadFiles(paths, workflow.Options{})
	if err != nil {
		return fmt.Errorf("--workflows: %w", err)
	}
	o.Workflows = set
	return nil
}
