package main

import (
	"testing"

	"github.com/sas-go/sas/shared/devkit/peers/harness"
)

// A strict run fails when an engine named did not run, and names it with
// why; it passes when every engine ran.
func TestAStrictRunFailsForAnEngineThatDidNotRun(t *testing.T) {
	ran := harness.Result{Engine: "sas", P50MS: 80}
	if err := notRun([]harness.Result{ran}); err != nil {
		t.Fatalf("every engine ran: %v", err)
	}
	err := notRun([]harness.Result{ran, {Engine: "dbos", Unavailable: "no PostgreSQL binaries"}, {Engine: "temporal", Error: "boom"}})
	if err == nil || err.Error() != "2 of 3 engines did not run: dbos: no PostgreSQL binaries; temporal: boom" {
		t.Fatalf("got %v", err)
	}
}
