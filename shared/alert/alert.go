// Package alert tells the operator that a step failed for good: an EMF metric
// line that a CloudWatch alarm watches, and a per-order failure event on the
// alert topic saying what to fix.
package alert

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// API is the part of the SNS client the alerter uses.
type API interface {
	Publish(context.Context, *sns.PublishInput, ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// Failure is the event published for a step that became Error.
type Failure struct {
	Event        string `json:"event"` // "StepFailed"
	OrderID      string `json:"orderId"`
	Step         int    `json:"step"`
	StepName     string `json:"stepName"`
	Undo         bool   `json:"undo,omitempty"` // an undo action failed: its work was not undone
	Compensation string `json:"compensation"`   // what happens to the order's completed work
	// OrderState is the order's state after the failure: Compensating,
	// Failed (nothing to undo), CompensationFailed (the operator must act)
	// or Held (the operator decides: onFailure: hold).
	OrderState   workflow.State `json:"orderState"`
	Attempt      int            `json:"attempt"`
	FailureCount int            `json:"failureCount"`
	LastError    string         `json:"lastError"`
	DetectedBy   string         `json:"detectedBy"` // "scheduler" or "supervisor"
	At           time.Time      `json:"at"`
}

// MaxLastErrorBytes bounds a Failure's LastError.
const MaxLastErrorBytes = 4 * message.MaxReasonQuote

// SNS's bounds on what the alerter publishes: a message of 256 KiB, a
// subject of fewer than 100 characters (ASCII, for an email).
const (
	MaxMessageBytes = 256 << 10
	MaxSubjectBytes = 99
)

// Alerter emits the metric and publishes the event.
type Alerter struct {
	api      API
	topicARN string
	metrics  *metrics.Emitter
}

// New returns an alerter publishing to topicARN.
func New(api API, topicARN string, m *metrics.Emitter) *Alerter {
	return &Alerter{api: api, topicARN: topicARN, metrics: m}
}

// StepFailed emits the StepErrors metric (and CompensationFailures, when the
// failure left the order CompensationFailed: every such end is alerted, so
// it is counted here, beside the alarm's other source) and publishes f.
// Delivery is at least once: a caller that retries after an error may
// publish twice.
func (a *Alerter) StepFailed(ctx context.Context, f Failure) error {
	f.Event = "StepFailed"
	// What failed says why at the length a reply carries (an SNS message
	// takes 256 KB, an email reads a few lines; the handlers' logs have
	// the whole).
	f.LastError = message.Clip(f.LastError, MaxLastErrorBytes)
	props := map[string]any{"OrderID": f.OrderID, "Step": f.StepName, "LastError": f.LastError}
	a.metrics.Count(metrics.StepErrors, 1, props)
	switch f.OrderState {
	case workflow.CompensationFailed:
		a.metrics.Count(metrics.CompensationFailures, 1, map[string]any{"OrderID": f.OrderID})
	case workflow.Held:
		a.metrics.Count(metrics.OrdersHeld, 1, map[string]any{"OrderID": f.OrderID})
	}
	body, err := message.Encode(f, MaxMessageBytes) // at most 32 KB: its LastError escaped at its worst, six times
	if err != nil {
		return fmt.Errorf("publish failure of %s/%s: %w", f.OrderID, f.StepName, err)
	}
	if err := a.publish(ctx, subject(f), body, "OrderID", f.OrderID); err != nil {
		return fmt.Errorf("publish failure of %s/%s: %w", f.OrderID, f.StepName, err)
	}
	a.metrics.Count(metrics.AlertsPublished, 1, props)
	return nil
}

// publish sends body to the alert topic with subject, and one string
// attribute (a subscription's filter may read it).
func (a *Alerter) publish(ctx context.Context, subject string, body []byte, attr, value string) error {
	_, err := a.api.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(a.topicARN), Subject: aws.String(subject), Message: aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			attr: {DataType: aws.String("String"), StringValue: aws.String(value)},
		},
	})
	return err
}

func subject(f Failure) string {
	s := fmt.Sprintf("Order %s failed at step %s", f.OrderID, f.StepName)
	if f.Undo {
		s = fmt.Sprintf("Order %s: undo %s did not happen", f.OrderID, f.StepName)
	}
	if len(s) > MaxSubjectBytes { // an order's id and a step's name are ASCII (their patterns)
		s = s[:MaxSubjectBytes]
	}
	return s
}

// CompensationOf says, for the alert, what happens to the completed work after
// a step (undo=false) or an undo action (undo=true) failed for good, from
// the order's state the failure led to (after); pivot: the failed step
// itself has no undo action and may have taken effect (it timed out for
// good after it ran).
func CompensationOf(undo bool, after workflow.State, pivot bool) string {
	switch {
	case undo:
		return "FAILED: this undo action did not happen; the order is CompensationFailed and needs the operator"
	case after == workflow.Held:
		return "HELD for the operator (onFailure: hold): nothing is undone yet. Retry the step (sasctl retry), skip it" +
			" with a result (sasctl skip), or undo the order (sasctl undo); at the end of its hold it is undone"
	case after == workflow.Compensating:
		return "started: the completed steps are being undone, the latest first (what still runs is awaited first)"
	case after == workflow.CompensationFailed && pivot:
		return "NOT STARTED: this step timed out for good and has no undo action, so it may have taken effect;" +
			" nothing was undone and the order is CompensationFailed. Check the remote service, then resubmit" +
			" the order: the step runs again with the same idempotency key"
	case after == workflow.CompensationFailed:
		return "STOPPED: a step that completed has no undo action, so the steps before it are not undone and the order is" +
			" CompensationFailed. Check the remote services, then resubmit the order: its failed steps run again with the" +
			" same idempotency keys"
	default:
		return "none needed: no completed step to undo"
	}
}
