package chaos

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
)

// A search that misses an order carrying its value, finds one that does
// not, or finds one twice breaks the invariant; one that finds exactly the
// orders of its value (none, for a value no order carries) keeps it.
func TestCheckSearchFindsAMissedAndAWronglyFoundOrder(t *testing.T) {
	north, south, none := searchKey{"region", "north"}, searchKey{"region", "south"}, searchKey{"tier", "none-such"}
	expected := map[searchKey][]string{north: {"o-1", "o-2"}, south: {"o-3"}, none: nil}
	require.Empty(t, checkSearch(expected, map[searchKey][]string{north: {"o-2", "o-1"}, south: {"o-3"}, none: nil}))

	got := checkSearch(expected, map[searchKey][]string{north: {"o-1", "o-3", "o-1"}, south: {"o-3"},
		none: {"o-2"}, {"vip", "true"}: {"o-4"}})
	require.Equal(t, []string{
		`region="north": order o-1 found twice`,
		`region="north": order o-2 not found by a search for it`,
		`region="north": order o-3 found, which does not carry it`,
		`tier="none-such": order o-2 found, which does not carry it`,
		`vip="true": order o-4 found, which does not carry it`,
	}, got)
}

// While the orders run, an order stored must be found; one sent and not
// stored yet may be, or not; one of another value must not.
func TestASearchWhileTheOrdersRunMustFindWhatIsStored(t *testing.T) {
	k := searchKey{"region", "north"}
	require.Empty(t, checkFound(k, []string{"o-1"}, []string{"o-1", "o-2"}, []string{"o-1", "o-2"}))
	require.Empty(t, checkFound(k, []string{"o-1"}, []string{"o-1", "o-2"}, []string{"o-1"}))
	require.Equal(t, []string{`region="north": order o-9 found, which does not carry it`,
		`region="north": order o-1 not found by a search for it`},
		checkFound(k, []string{"o-1"}, []string{"o-1", "o-2"}, []string{"o-9"}))
}

// A bulk report must add up: done, done already, refused, changed and
// left make the orders listed; each order once, each of the value searched;
// a reason counted per refusal or change.
func TestBulkReportsThatDoNotAddUpAreCaught(t *testing.T) {
	k := searchKey{"region", "north"}
	carries := []string{"o-1", "o-2", "o-3", "o-4"}
	good := func() operator.BulkReport {
		return operator.BulkReport{Action: "cancel", Listed: 4, Done: 1, Already: 1, Refused: 1, Left: 1,
			Why: map[string]int{"it ended Processed": 1},
			Orders: []operator.BulkResult{{OrderID: "o-1", Outcome: operator.BulkDone}, {OrderID: "o-2", Outcome: operator.BulkAlready},
				{OrderID: "o-3", Outcome: operator.BulkRefused, Why: "it ended Processed"}}}
	}
	require.Empty(t, bulkInconsistent(good(), k, carries))

	miscounted := good()
	miscounted.Done = 2
	require.Equal(t, []string{`cancel of region="north": 2 done, 1 done already, 1 refused, 0 changed and 1 left make 5, not the 4 listed`},
		bulkInconsistent(miscounted, k, carries))

	twice := good()
	twice.Orders[1].OrderID = "o-1"
	require.Equal(t, []string{`cancel of region="north": order o-1 acted on twice`}, bulkInconsistent(twice, k, carries))

	other := good()
	other.Orders[2].OrderID = "o-9"
	require.Equal(t, []string{`cancel of region="north": order o-9 listed, which does not carry the value`},
		bulkInconsistent(other, k, carries))

	unreported := good()
	unreported.Orders = unreported.Orders[:2]
	unreported.Why = map[string]int{}
	require.Equal(t, []string{`cancel of region="north": 2 orders reported, 4 listed and 1 left`,
		`cancel of region="north": 0 reasons counted for 1 refused and 0 changed`}, bulkInconsistent(unreported, k, carries))
}

// A sealed run's item holding a searchable value in clear, at any depth,
// is named; an item holding it only as its keyed hash is not.
func TestAValueInClearIsFoundInAnyAttribute(t *testing.T) {
	value := longestSearchValue
	item := func(av types.AttributeValue) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"OrderID": &types.AttributeValueMemberS{Value: "o-1"},
			"SK": &types.AttributeValueMemberS{Value: "task"}, "Data": av}
	}
	nested := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberB{Value: []byte("x" + value + "y")}}}}}
	require.Contains(t, inClear(item(nested), []string{value}), `item "o-1"/"task" holds`)
	require.Contains(t, inClear(item(&types.AttributeValueMemberS{Value: value}), []string{"north-west", value}), "holds")
	require.Empty(t, inClear(item(&types.AttributeValueMemberS{Value: "hmac:abc"}), []string{value}))
}
