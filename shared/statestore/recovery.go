package statestore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/workflow"
)

// MarkAlerted records that the record's Error alert was sent: it has no
// deadline any more. Marking an already alerted record is a no-op. The
// order's index entry stays: the Supervisor moves it on, or removes it, when
// it comes (an alert is sent once per failure, so this costs little).
func (s *Store) MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error {
	ch := newChange(now)
	rec := ch.rec(r)
	ch.require(rec, recHas("d"))
	ch.b.If(x.Contains(ch.attr("Ua"), ch.b.String(sortKey(r))))
	ch.put(rec, "al", &types.AttributeValueMemberBOOL{Value: true})
	ch.drop(rec, "d")
	ch.b.Delete(ch.attr("Ua"), ch.b.Value(&types.AttributeValueMemberSS{Value: []string{sortKey(r)}}))
	ch.incident(rec, "operator alerted")
	in, err := s.fieldsInput(ch, orderID)
	if err != nil {
		return err
	}
	_, err = s.updateItem(ctx, ch, in)
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark %s/%s alerted: %w", orderID, sortKey(r), err)
	}
	return nil
}

// AlertPending reports whether record r of the order failed for good and its
// alert is not yet recorded as sent (read consistently): a reply delivered
// twice is alerted once.
func (s *Store) AlertPending(ctx context.Context, orderID string, r workflow.Ref) (bool, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return false, err
	}
	rec, ok := it.Recs[sortKey(r)]
	return ok && rec.State == string(workflow.Error) && !rec.Alerted && rec.DueAt != 0, nil
}
