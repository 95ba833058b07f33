package alert

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
)

// Undeployed is the event published for a version of a workflow the
// deployment no longer runs while orders in flight still run it: they go on
// from the definition the state table keeps, and the operator should move
// them (sasctl migrate) or let them end.
type Undeployed struct {
	Event    string    `json:"event"` // "OrdersOfUndeployedVersion"
	Workflow string    `json:"workflow"`
	Version  string    `json:"version"`
	Base     string    `json:"base,omitempty"` // the version it is a form of, for a derived one
	Orders   int       `json:"orders"`         // in flight, as the census counted them
	Examples []string  `json:"examples"`       // some of them (at most 3)
	Action   string    `json:"action"`         // what to do
	At       time.Time `json:"at"`
}

// UndeployedAction says what to do about orders of a version the
// deployment no longer runs (docs/operations.md's runbook).
func UndeployedAction(workflow, version string) string {
	return fmt.Sprintf("they run the definition of %s %s the state table keeps, which this deployment no longer runs: "+
		"list them (sasctl workflow versions --workflows FILES), then move them to the deployed version "+
		"(sasctl migrate --to FILE, --dry-run first), or deploy %s again until they end; see docs/operations.md, "+
		"\"Orders of a version no longer deployed\"", workflow, version, version)
}

// VersionUndeployed publishes u on the alert topic (its metric is the
// census's, OrdersOfUndeployedVersions). Delivery is at least once.
func (a *Alerter) VersionUndeployed(ctx context.Context, u Undeployed) error {
	u.Event = "OrdersOfUndeployedVersion"
	body, err := message.Encode(u, MaxMessageBytes)
	if err != nil {
		return fmt.Errorf("publish undeployed version %s %s: %w", u.Workflow, u.Version, err)
	}
	subject := fmt.Sprintf("%d orders run %s %s, no longer deployed", u.Orders, u.Workflow, u.Version)
	if len(subject) > MaxSubjectBytes { // names and versions are ASCII (their patterns)
		subject = subject[:MaxSubjectBytes]
	}
	if err := a.publish(ctx, subject, body, "Workflow", u.Workflow); err != nil {
		return fmt.Errorf("publish undeployed version %s %s: %w", u.Workflow, u.Version, err)
	}
	a.metrics.Count(metrics.AlertsPublished, 1, map[string]any{"Workflow": u.Workflow, "Version": u.Version,
		"Examples": strings.Join(u.Examples, ",")})
	return nil
}
