// Package queue sends the product's messages to SQS.
package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/tracing"
)

// API is the part of the SQS client the sender uses.
type API interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	BatchAPI
}

// Sender sends JSON messages.
type Sender struct{ api API }

// NewSender returns a sender over an SQS client.
func NewSender(api API) *Sender { return &Sender{api: api} }

// NewBuffer returns a buffer that sends through the same client (see
// WithBuffer).
func (s *Sender) NewBuffer() *Buffer { return &Buffer{api: s.api} }

// SendJSON sends v, encoded as every product message is (message.Encode),
// to the queue, delivered after delay (rounded up to whole seconds, at most
// 15 minutes). With a context from WithBuffer, the message waits in the
// buffer until it is flushed. Every message it sends is read with the
// limit of a work message (message.MaxWorkBytes: the Scheduler's, an
// Agent's and a status reader's decoders), well within SQS's 256 KiB with
// its attributes: a body over it is an error that says so, never sent to
// be refused by its reader.
func (s *Sender) SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error {
	body, err := message.Encode(v, message.MaxWorkBytes)
	if err != nil {
		return fmt.Errorf("message for %s: %w", queueURL, err)
	}
	secs := min(max(int32((delay+time.Second-1)/time.Second), 0), 900)
	attrs := tracing.Attributes(ctx) // the order's trace goes on in whoever takes it
	if b, owner := bufferOf(ctx); b != nil {
		b.add(owner, queueURL, string(body), secs, attrs)
		return nil
	}
	_, err = s.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(body)), DelaySeconds: secs, MessageAttributes: attrs,
	})
	if err != nil {
		return fmt.Errorf("send to %s: %w", queueURL, err)
	}
	return nil
}

// MaxRejectReasonBytes bounds a rejected message's RejectReason attribute
// as it travels: escaped (RejectReasonText), then cut on a character's
// boundary. With it and SourceQueue, a body its queue took at its largest
// fits its dead-letter queue (topology.DLQMaxMessageBytes).
const MaxRejectReasonBytes = 1024

// Reject sends a message that can never succeed to a dead-letter queue, as
// it was, with the reason (RejectReasonText, at most MaxRejectReasonBytes)
// and its source as message attributes.
func (s *Sender) Reject(ctx context.Context, dlqURL, body, source, reason string) error {
	reason = message.Clip(RejectReasonText(reason), MaxRejectReasonBytes)
	_, err := s.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(dlqURL), MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"RejectReason": {DataType: aws.String("String"), StringValue: aws.String(reason)},
			"SourceQueue":  {DataType: aws.String("String"), StringValue: aws.String(source)},
		},
	})
	if err != nil {
		return fmt.Errorf("reject to %s: %w", dlqURL, err)
	}
	return nil
}

// visibilityAPI is the part of an SQS client that hides a received message.
type visibilityAPI interface {
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Hide makes a received message invisible for d from now (rounded up to
// whole seconds, at most 12 hours): SQS delivers it again then, whatever the
// queue's visibility timeout.
func (s *Sender) Hide(ctx context.Context, queueURL, receiptHandle string, d time.Duration) error {
	api, ok := s.api.(visibilityAPI)
	if !ok {
		return fmt.Errorf("hide a message of %s: the client cannot change a message's visibility", queueURL)
	}
	secs := min(max(int32((d+time.Second-1)/time.Second), 0), 43200)
	_, err := api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL),
		ReceiptHandle: aws.String(receiptHandle), VisibilityTimeout: secs})
	if err != nil {
		return fmt.Errorf("hide a message of %s: %w", queueURL, err)
	}
	return nil
}

// Depth is how many messages a queue holds: waiting for a consumer
// (visible), in a consumer's hands (in flight), and sent with a delay not
// passed yet (delayed: an agent's flow control holds their calls).
type Depth struct {
	Visible  int
	InFlight int
	Delayed  int
}

// Depth reads SQS's ApproximateNumberOfMessages (visible; not delayed),
// ApproximateNumberOfMessagesNotVisible (in flight) and
// ApproximateNumberOfMessagesDelayed (0 where a queue does not say).
func (s *Sender) Depth(ctx context.Context, queueURL string) (Depth, error) {
	visible, inFlight := types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible
	delayed := types.QueueAttributeNameApproximateNumberOfMessagesDelayed
	out, err := s.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{visible, inFlight, delayed}})
	if err != nil {
		return Depth{}, fmt.Errorf("depth of %s: %w", queueURL, err)
	}
	var d Depth
	for _, a := range []struct {
		name types.QueueAttributeName
		dst  *int
	}{{visible, &d.Visible}, {inFlight, &d.InFlight}} {
		if *a.dst, err = strconv.Atoi(out.Attributes[string(a.name)]); err != nil {
			return Depth{}, fmt.Errorf("depth of %s: %s: %w", queueURL, a.name, err)
		}
	}
	d.Delayed, _ = strconv.Atoi(out.Attributes[string(delayed)])
	return d, nil
}
