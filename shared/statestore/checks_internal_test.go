package statestore

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// The attributes a check tests in Go are the record's as stored: each one
// is there exactly when the record's encoding has it, with the same value
// (an omitempty field at its zero value is absent), so a check holds on an
// item read as DynamoDB finds it holds on the item written.
func TestACheckReadsTheRecordAsItIsStored(t *testing.T) {
	t.Parallel()
	full := recItem{State: "Processing", Round: 2, Agent: "svc", Attempt: 3, DueAt: 1700, LockedBy: "a-1", Token: "n1",
		Kind: "event", Armed: 1600, Woken: 1650}
	for _, r := range []recItem{{}, full} {
		stored, err := attributevalue.MarshalMap(r)
		require.NoError(t, err)
		for _, name := range []string{"s", "r", "a", "k", "d", "lk", "tk", "ki", "wa", "wk"} {
			v, ok := r.attr(name)
			av, want := stored[name]
			require.Equal(t, want, ok, "%s stored", name)
			if !ok {
				continue
			}
			switch s := av.(type) {
			case *types.AttributeValueMemberS:
				require.Equal(t, text(s.Value), v, name)
			case *types.AttributeValueMemberN:
				require.Equal(t, s.Value, strconv.FormatInt(v.n, 10), name)
				require.True(t, v.num, name)
			default:
				t.Fatalf("%s: a check compares strings and numbers, not %T", name, av)
			}
		}
	}
}
