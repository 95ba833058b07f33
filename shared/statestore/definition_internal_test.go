package statestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// definitionsOnly is a table that counts the definitions written to it (each
// write takes a while, as a request does) and accepts every transaction.
type definitionsOnly struct {
	API
	puts atomic.Int64
	fail atomic.Bool
}

func (d *definitionsOnly) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	d.puts.Add(1)
	time.Sleep(20 * time.Millisecond)
	if d.fail.Load() {
		return nil, errors.New("throttled")
	}
	return &dynamodb.PutItemOutput{}, nil
}

func (d *definitionsOnly) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// A batch's submissions run at once: the first of a workflow version this
// process submits writes its definition, the others wait for that write
// instead of each making its own (a batch of ten made ten, 0.05 a request
// an order in sasctl bench); a write that failed is made again by the next.
func TestAProcessWritesAVersionsDefinitionOnce(t *testing.T) {
	t.Parallel()
	db := &definitionsOnly{}
	s := New(db, "orders", "state", 1)
	def := workflow.Orders(workflow.Settings{})
	submit := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, err := s.Submit(context.Background(), Submission{OrderID: fmt.Sprintf("o-%d", i), Order: "{}", Workflow: def, Now: time.Now()})
				require.NoError(t, err)
			})
		}
		wg.Wait()
	}
	submit(10)
	require.Equal(t, int64(1), db.puts.Load(), "one definition write for ten submissions at once")
	submit(10)
	require.Equal(t, int64(1), db.puts.Load(), "none once it is stored")

	other := def
	other.Version = "another"
	db.fail.Store(true)
	_, err := s.Submit(context.Background(), Submission{OrderID: "o-x", Order: "{}", Workflow: other, Now: time.Now()})
	require.Error(t, err)
	db.fail.Store(false)
	_, err = s.Submit(context.Background(), Submission{OrderID: "o-y", Order: "{}", Workflow: other, Now: time.Now()})
	require.NoError(t, err)
	require.Equal(t, int64(3), db.puts.Load(), "a failed write is made again by the next submission")
}
