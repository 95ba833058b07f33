package chaos

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/statestore"
)

// clearCopies are the bodies sent by pointer that a sealed run's bucket
// still holds in clear under incoming/ though Submission took them (an
// order that is stored, an event with data its order received), and the
// payloads under orders/ not sealed in the object form (unsealed). A body
// refused (to the DLQ) keeps its clear copy, and so does one whose repeat
// is still on its way: the check is tried again for up to within, as the
// last repeats are taken. It returns them, and how many bodies by pointer
// it found written over, by kind (order, event).
func clearCopies(ctx context.Context, stack *localrun.Stack, tasks map[string]statestore.Task, within time.Duration) (clear []string, over map[string]int, err error) {
	deadline := time.Now().Add(within)
	for {
		clear, over, err = findClearCopies(ctx, stack, tasks)
		if err != nil || len(clear) == 0 || time.Now().After(deadline) {
			return clear, over, err
		}
		if !sleepCtx(ctx, 2*time.Second) {
			return clear, over, ctx.Err()
		}
	}
}

// findClearCopies reads every object under incoming/ once, and the head of
// every one under orders/ (clearCopies, unsealed).
func findClearCopies(ctx context.Context, stack *localrun.Stack, tasks map[string]statestore.Task) (clear []string, over map[string]int, err error) {
	if clear, err = unsealed(ctx, stack); err != nil {
		return nil, nil, err
	}
	over = map[string]int{}
	c, bucket := stack.Deployment.Clients.S3, stack.Resources.PayloadBucket
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(offload.IncomingPrefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("list %s under %s: %w", bucket, offload.IncomingPrefix, err)
		}
		for _, o := range page.Contents {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: o.Key})
			if err != nil {
				return nil, nil, fmt.Errorf("read s3://%s/%s: %w", bucket, aws.ToString(o.Key), err)
			}
			b, err := io.ReadAll(out.Body)
			_ = out.Body.Close()
			if err != nil {
				return nil, nil, fmt.Errorf("read s3://%s/%s: %w", bucket, aws.ToString(o.Key), err)
			}
			switch why, written := clearCopy(b, tasks, stack.Deployment.Config.Workflows); {
			case written != "":
				over[written]++
			case why != "":
				clear = append(clear, aws.ToString(o.Key)+": "+why)
			}
		}
	}
	slices.Sort(clear)
	return clear, over, nil
}

// clearCopy says whether body, under incoming/, is in clear though
// Submission took it (why), or was written over once taken (written: the
// kind, "order" or "event"): an order as stored (sealed, or its claim
// check), an event with its data so. A body this run did not send, an
// order not stored, or an event its order did not receive (refused) is
// neither. An order's id is the member its workflow names (ids).
func clearCopy(body []byte, tasks map[string]statestore.Task, ids message.IDFields) (why, written string) {
	if kept.Own(body) {
		return "", "order"
	}
	m, err := message.DecodeOrdersMessage(string(body), ids)
	if err != nil {
		return "", ""
	}
	switch m := m.(type) {
	case message.Order:
		if _, taken := tasks[m.OrderID]; taken {
			return fmt.Sprintf("order %s, stored", m.OrderID), ""
		}
	case message.Event:
		t, ok := tasks[m.OrderID]
		switch {
		case kept.Own(m.Data):
			return "", "event"
		case ok && m.Token == "" && t.Events[m.Event] == m.EventID:
			return fmt.Sprintf("event %s of order %s, received", m.EventID, m.OrderID), ""
		}
	}
	return "", ""
}

// sealedHead is as much of an object as says whether it is sealed in the
// object form (seal.IsObject).
const sealedHead = 64

// unsealed are the payloads a sealed run keeps under orders/ (an order, a
// result, an event's data) that are not sealed in the object form, which
// weighs its plaintext: each object's head is read (a ranged GET), and its
// key must say so (payload.SealedSuffix).
func unsealed(ctx context.Context, stack *localrun.Stack) ([]string, error) {
	var bad []string
	c, bucket := stack.Deployment.Clients.S3, stack.Resources.PayloadBucket
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(payload.OrdersPrefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s under %s: %w", bucket, payload.OrdersPrefix, err)
		}
		for _, o := range page.Contents {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: o.Key, Range: aws.String(fmt.Sprintf("bytes=0-%d", sealedHead-1))})
			if err != nil {
				return nil, fmt.Errorf("read s3://%s/%s: %w", bucket, aws.ToString(o.Key), err)
			}
			head, err := io.ReadAll(io.LimitReader(out.Body, sealedHead))
			_ = out.Body.Close()
			if err != nil {
				return nil, fmt.Errorf("read s3://%s/%s: %w", bucket, aws.ToString(o.Key), err)
			}
			if !seal.IsObject(head) || !strings.HasSuffix(aws.ToString(o.Key), payload.SealedSuffix) {
				bad = append(bad, fmt.Sprintf("%s: not sealed in the object form (%.32q)", aws.ToString(o.Key), head))
			}
		}
	}
	return bad, nil
}
