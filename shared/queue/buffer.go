package queue

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS limits on one SendMessageBatch request.
const (
	maxBatchEntries = 10
	maxBatchBytes   = 256 * 1024
)

// Buffer holds the messages the records of one invocation send, so that they
// go out together, ten per SendMessageBatch request, instead of one request
// each: at batch size 10 that is a tenth of the send requests, which SQS
// bills. Each message belongs to the record (its owner) that sent it; a
// message that cannot be sent fails its owner, which SQS then delivers again.
type Buffer struct {
	api BatchAPI
	mu  sync.Mutex
	out []buffered
}

type buffered struct {
	owner, queueURL, body string
	delay                 int32
	attrs                 map[string]types.MessageAttributeValue // its trace context
}

// size is what the message counts against a request's size: its body and
// its attributes' names, types and values.
func (m buffered) size() int {
	n := len(m.body)
	for k, v := range m.attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
	}
	return n
}

// BatchAPI is the part of the SQS client a Buffer uses.
type BatchAPI interface {
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

type bufferKey struct{}
type ownerKey struct{}

// WithBuffer makes SendJSON calls made with the returned context go to b, as
// messages of owner, instead of to SQS.
func WithBuffer(ctx context.Context, b *Buffer, owner string) context.Context {
	return context.WithValue(context.WithValue(ctx, bufferKey{}, b), ownerKey{}, owner)
}

func bufferOf(ctx context.Context) (*Buffer, string) {
	b, _ := ctx.Value(bufferKey{}).(*Buffer)
	owner, _ := ctx.Value(ownerKey{}).(string)
	return b, owner
}

func (b *Buffer) add(owner, queueURL, body string, delay int32, attrs map[string]types.MessageAttributeValue) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out = append(b.out, buffered{owner: owner, queueURL: queueURL, body: body, delay: delay, attrs: attrs})
}

// Len is how many messages wait.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.out)
}

// Flush sends the messages of every owner not in skip (records that failed:
// a killed invocation sends nothing more), grouped by queue, and returns the
// owners one of whose messages was not sent, with the first error.
func (b *Buffer) Flush(ctx context.Context, skip map[string]bool) (failed map[string]bool, err error) {
	b.mu.Lock()
	out := b.out
	b.out = nil
	b.mu.Unlock()
	failed = map[string]bool{}
	byQueue := map[string][]buffered{}
	var queues []string
	for _, m := range out {
		if skip[m.owner] {
			continue
		}
		if _, ok := byQueue[m.queueURL]; !ok {
			queues = append(queues, m.queueURL)
		}
		byQueue[m.queueURL] = append(byQueue[m.queueURL], m)
	}
	for _, url := range queues {
		msgs := byQueue[url]
		for len(msgs) > 0 {
			n, size := 0, 0
			for n < len(msgs) && n < maxBatchEntries && (n == 0 || size+msgs[n].size() <= maxBatchBytes) {
				size += msgs[n].size()
				n++
			}
			if serr := b.send(ctx, url, msgs[:n], failed); serr != nil && err == nil {
				err = serr
			}
			msgs = msgs[n:]
		}
	}
	return failed, err
}

func (b *Buffer) send(ctx context.Context, url string, msgs []buffered, failed map[string]bool) error {
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(m.body),
			DelaySeconds: m.delay, MessageAttributes: m.attrs}
	}
	res, err := b.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		for _, m := range msgs {
			failed[m.owner] = true
		}
		return fmt.Errorf("send %d messages to %s: %w", len(msgs), url, err)
	}
	for _, f := range res.Failed {
		if i, cerr := strconv.Atoi(aws.ToString(f.Id)); cerr == nil && i < len(msgs) {
			failed[msgs[i].owner] = true
		}
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("send to %s: %d of %d refused: %s", url, len(res.Failed), len(msgs), aws.ToString(res.Failed[0].Message))
	}
	return nil
}
