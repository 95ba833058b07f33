package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/statestore"
)

// Signalled says what an event sent to an order was.
type Signalled struct {
	OrderID string `json:"orderId"`
	Event   string `json:"event"`
	EventID string `json:"eventId"` // send it again to repeat the event: a repeat is a no-op
	Queue   string `json:"queue"`
	// Ahead: the order was not stored when the event was sent (Signal with
	// ahead). Submission takes the event once the order is stored, or,
	// if it is not within about 10 s, refuses it to the events DLQ.
	Ahead bool `json:"ahead,omitempty"`
	// Offloaded: the event was over SQS's 256 KiB, so it was kept in the
	// payload bucket and a pointer to it sent, as the SQS Extended Client
	// sends one.
	Offloaded bool `json:"offloaded,omitempty"`
	// MessageID is the id SQS gave the event's message (a message SQS
	// moves to the DLQ keeps it; one Submission refuses gets a new one).
	MessageID string `json:"-"`
}

// ErrBadSignal wraps why an event cannot be sent (a bad name, id or data):
// nothing was sent.
var ErrBadSignal = errors.New("bad event")

// Signal sends an event to an order, on the events queue, as a service
// would ({"kind":"event",...}): the step of the order that waits for it
// takes its data as its result, or the order keeps it until it reaches
// that step. With no eventID, one is made (sasctl-<16 hex digits>): sending
// the same eventID again is a no-op. An event Submission would refuse to
// decode is not sent: the error wraps ErrBadSignal and says why. An order
// not stored (yet) is ErrNotFound and nothing is sent, unless ahead: then
// the event is sent all the same (Signalled.Ahead), as a service's would
// be, and Submission takes it once the order is stored (an order just
// submitted), or refuses it. What the order makes of it (no step waits for
// it, the order ended) Submission decides, and puts a refused event in the
// events DLQ with the reason. An event over SQS's 256 KiB is kept in the
// payload bucket (the one the order's claim checks name, else
// PayloadBucket) and a pointer to it sent, as the SQS Extended Client
// sends one (Signalled.Offloaded).
func (o *Operator) Signal(ctx context.Context, orderID, event, eventID string, data json.RawMessage, ahead bool) (Signalled, error) {
	if eventID == "" {
		eventID = newEventID()
	}
	body, err := message.Encode(message.Event{Kind: message.KindEvent, OrderID: orderID, Event: event, EventID: eventID, Data: data},
		message.MaxEventBytes)
	if errors.Is(err, message.ErrTooLarge) {
		return Signalled{}, fmt.Errorf("%w: %w (its data at most a workflow's largest resultLimit)", ErrBadSignal, err)
	}
	if err != nil {
		return Signalled{}, fmt.Errorf("%w: data: %w", ErrBadSignal, err)
	}
	if _, err := message.DecodeOrdersMessage(string(body), nil); err != nil {
		return Signalled{}, fmt.Errorf("%w: %s", ErrBadSignal, strings.TrimPrefix(err.Error(), "invalid message: "))
	}
	res := Signalled{OrderID: orderID, Event: event, EventID: eventID, Queue: o.Topology.EventsQueue().Name}
	// An order that is not stored is said so here, rather than "sent" and
	// found in the DLQ 10 s later; unless the caller knows it is on its way.
	task, _, err := o.Store.Load(ctx, orderID)
	switch {
	case errors.Is(err, statestore.ErrNotFound) && ahead:
		res.Ahead = true
	case err != nil:
		return Signalled{}, fmt.Errorf("signal %s: %w", orderID, err)
	}
	url, err := o.QueueURL(ctx, res.Queue)
	if err != nil {
		return Signalled{}, err
	}
	msg := string(body)
	if len(body) > offload.MaxMessageBytes {
		bucket := "" // an order not stored: the bucket it is told
		if !res.Ahead {
			if bucket, err = o.payloadBucket(ctx, orderID, task.Round); err != nil {
				return Signalled{}, err
			}
		}
		if msg, err = o.offload(ctx, bucket, body); err != nil {
			return Signalled{}, fmt.Errorf("event %s for %s is %d bytes: %w", event, orderID, len(body), err)
		}
		res.Offloaded = true
	}
	out, err := o.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &msg})
	if err != nil {
		return Signalled{}, fmt.Errorf("send event %s to %s: %w", event, res.Queue, err)
	}
	res.MessageID = aws.ToString(out.MessageId)
	return res, nil
}

// newEventID is a fresh eventId.
func newEventID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand never fails (Go 1.24+)
	return "sasctl-" + hex.EncodeToString(b)
}
