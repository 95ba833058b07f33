package statestore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// MarkAlerted records that the record's Error alert was sent: it has no
// deadline any more. Marking an already alerted record is a no-op. The
// order's index entry stays: the Supervisor moves it on, or removes it, when
// it comes (an alert is sent once per failure, so this costs little).
func (s *Store) MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error {
	ch := newChange(now)
	p := ch.rec(r)
	ch.when("attribute_exists(%[1]s.d) AND contains(Ua, :skv)", p)
	ch.val("skv", str(sortKey(r)))
	ch.set = append(ch.set, p+".al = "+ch.val("true", &types.AttributeValueMemberBOOL{Value: true}))
	ch.remove = append(ch.remove, p+".d")
	ch.del = append(ch.del, "Ua "+ch.val("sk", &types.AttributeValueMemberSS{Value: []string{sortKey(r)}}))
	ch.incident(p, "operator alerted")
	in, err := s.input(ch, orderID)
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
