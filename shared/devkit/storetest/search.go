package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/searchkey"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Search checks on the engine c names how orders are found: by a
// searchable field's index (only the orders of its value read, every page,
// no repeat, the index items expiring with the order and listed nowhere
// else), by where an order is (step, agent, reason, version, end time),
// and, in a deployment that seals its orders' data, by a field kept as its
// keyed hash (moto's KMS), its value in clear nowhere in the table.
func Search(t *testing.T, c *awsclient.Clients) {
	for _, tc := range []namedCase{
		{"AFieldFindsItsOrdersOnly", func(t *testing.T) { aFieldFindsItsOrders(t, c.DynamoDB) }},
		{"WhereAnOrderIsFindsIt", func(t *testing.T) { whereAnOrderIs(t, c.DynamoDB) }},
		{"ASealedFieldIsKeptAsItsKeyedHash", func(t *testing.T) { aSealedField(t, c) }},
		{"TheLongestFieldAndValueAreFound", func(t *testing.T) { theLongestField(t, c.DynamoDB) }},
		{"AnEndedOrderIsFoundByTheEndIndex", func(t *testing.T) { anEndedOrderIsFoundByTheEndIndex(t, c.DynamoDB) }},
		{"ATableOfAnEarlierReleaseGetsTheEndIndex", func(t *testing.T) { aTableOfAnEarlierReleaseGetsTheEndIndex(t, c.DynamoDB) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}

// searchDef is def(2) declaring customerId searchable, at version v.
func searchDef(v string) workflow.Definition {
	d := def(2)
	d.Version, d.Search = v, []string{"customerId"}
	return d
}

// submitFor submits order id of customer (none if ""), its field named by
// n (nil: as it is).
func submitFor(t *testing.T, s *statestore.Store, d workflow.Definition, id, customer string, n searchkey.Namer) {
	t.Helper()
	body := fmt.Sprintf(`{"orderId":%q}`, id)
	if customer != "" {
		body = fmt.Sprintf(`{"orderId":%q,"customerId":%q}`, id, customer)
	}
	names, err := searchkey.Names(context.Background(), d, json.RawMessage(body), n)
	require.NoError(t, err)
	created, err := s.Submit(context.Background(), statestore.Submission{OrderID: id, Order: body, Workflow: d, Search: names, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
}

// allWithField pages WithField by pages of size, failing on a repeat.
func allWithField(t *testing.T, s *statestore.Store, field string, names []string, size int) []string {
	t.Helper()
	var all []string
	token := ""
	for {
		ids, next, err := s.WithField(context.Background(), field, names, size, token)
		require.NoError(t, err)
		require.LessOrEqual(t, len(ids), size)
		for _, id := range ids {
			require.NotContains(t, all, id, "listed twice")
		}
		all = append(all, ids...)
		if next == "" {
			return all
		}
		token = next
	}
}

func aFieldFindsItsOrders(t *testing.T, db *dynamodb.Client) {
	ctx := context.Background()
	topo := NewTables(t, db)
	s := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).WithRetention(keep)
	d := searchDef("v1")
	for id, customer := range map[string]string{"o-1": "c-1", "o-2": "c-1", "o-3": "c-1", "o-4": "c-2", "o-5": ""} {
		submitFor(t, s, d, id, customer, nil)
	}
	for _, size := range []int{1, 2, 100} {
		require.ElementsMatch(t, []string{"o-1", "o-2", "o-3"}, allWithField(t, s, "customerId", []string{"c-1"}, size), "pages of %d", size)
	}
	require.Equal(t, []string{"o-4"}, allWithField(t, s, "customerId", []string{"c-2"}, 10))
	require.Empty(t, allWithField(t, s, "customerId", []string{"c-3"}, 10))
	require.ElementsMatch(t, []string{"o-1", "o-2", "o-3", "o-4"}, allWithField(t, s, "customerId", []string{"c-1", "c-2"}, 1),
		"names in turn")
	_, _, err := s.WithField(ctx, "customerId", []string{"c-1"}, 1, "garbage!")
	require.ErrorIs(t, err, statestore.ErrBadPageToken)

	// The index item expires with the order's orders item, and is no task.
	ordersExp := rawItem(t, db, topo.OrdersTable(), "o-1", "")[statestore.ExpiresAttribute]
	require.NotNil(t, ordersExp)
	require.Equal(t, ordersExp, rawItem(t, db, topo.StateTable(), topology.SearchPartition("customerId", "c-1"), "o-1")[statestore.ExpiresAttribute])
	tasks, _, err := s.SearchTasks(ctx, statestore.TaskFilter{}, 100, "")
	require.NoError(t, err)
	require.Len(t, tasks, 5, "a scan of the orders lists no index item")
	n, err := s.CountInFlight(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, n, "no index item is in the deadline index")
}

func whereAnOrderIs(t *testing.T, db *dynamodb.Client) {
	ctx := context.Background()
	s := NewStore(t, db)
	submitFor(t, s, searchDef("v1"), "ready", "", nil)
	submitFor(t, s, searchDef("v2"), "refused", "", nil)
	st, err := claim(ctx, s, "refused", step0, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "refused", step0, st.Attempt, "no courier today", t0.Add(time.Second))
	require.NoError(t, err)
	ended := t0.Add(time.Second)
	for what, c := range map[string]struct {
		f    statestore.TaskFilter
		want []string
	}{
		"at s0":              {statestore.TaskFilter{Step: "s0"}, []string{"ready", "refused"}},
		"at s1":              {statestore.TaskFilter{Step: "s1"}, nil},
		"agent svc":          {statestore.TaskFilter{Agent: "svc"}, []string{"ready", "refused"}},
		"agent other":        {statestore.TaskFilter{Agent: "other"}, nil},
		"refused":            {statestore.TaskFilter{Reason: "refused"}, []string{"refused"}},
		"its text, any case": {statestore.TaskFilter{Reason: "COURIER"}, []string{"refused"}},
		"a timeout":          {statestore.TaskFilter{Reason: "timeout"}, nil},
		"refused at s0":      {statestore.TaskFilter{Step: "s0", Reason: "refused"}, []string{"refused"}},
		"version v1":         {statestore.TaskFilter{Version: "v1"}, []string{"ready"}},
		"ended after":        {statestore.TaskFilter{EndedAfter: ended.Add(-time.Millisecond)}, []string{"refused"}},
		"ended before":       {statestore.TaskFilter{EndedBefore: ended.Add(time.Millisecond)}, []string{"refused"}},
		"ended before it":    {statestore.TaskFilter{EndedBefore: ended}, nil},
	} {
		got := map[string]bool{}
		token := ""
		for {
			tasks, next, err := s.SearchTasks(ctx, c.f, 1, token)
			require.NoError(t, err)
			for _, task := range tasks {
				got[task.OrderID] = true
				require.True(t, c.f.Keeps(task), what)
			}
			if token = next; next == "" {
				break
			}
		}
		require.ElementsMatch(t, c.want, keysOf(got), what)
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func aSealedField(t *testing.T, c *awsclient.Clients) {
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	keyID, err := provision.EnsureKey(ctx, c.KMS, "alias/"+strings.ToLower(topo.Prefix)+"-search")
	require.NoError(t, err)
	namer := searchkey.NewNamer(c.DynamoDB, topo.StateTable(), seal.New(c.KMS, keyID))
	d := searchDef("v1")
	const secret = "c-secret-<1>&"
	submitFor(t, s, d, "o-sealed", secret, namer)
	submitFor(t, s, d, "o-sealed-2", secret, namer)
	submitFor(t, s, d, "o-before", secret, nil) // submitted before the deployment sealed

	// The operator's sealer names no key: each blob names its own.
	names, err := searchkey.Lookup(ctx, c.DynamoDB, topo.StateTable(), seal.New(c.KMS, ""), secret)
	require.NoError(t, err)
	require.Len(t, names, 2, "its value as it is, and its name under the one secret")
	require.ElementsMatch(t, []string{"o-sealed", "o-sealed-2", "o-before"}, allWithField(t, s, "customerId", names, 1))
	require.Equal(t, []string{"o-before"}, allWithField(t, s, "customerId", names[:1], 10), "kept in clear only before it sealed")

	// Nowhere in the state table but the clear order's own index item.
	out, err := c.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(topo.StateTable()), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	for _, item := range out.Items {
		b, err := json.Marshal(item)
		require.NoError(t, err)
		if strings.Contains(string(b), `"o-before"`) {
			continue
		}
		require.NotContains(t, string(b), "c-secret", "a sealed order's searchable value is in clear")
	}
}

// theLongestField: the longest path a workflow accepts and a value of the
// most bytes kept as it is (control bytes, <, &, quotes, two-byte runes),
// and one byte more (kept as its hash), are found by their value.
func theLongestField(t *testing.T, db *dynamodb.Client) {
	ctx := context.Background()
	s := NewStore(t, db)
	d := def(1)
	field := "a" + strings.Repeat("b", workflow.MaxSearchPathBytes-1)
	d.Search = []string{field}
	unit := "\x01<&\"é" // 6 bytes
	longest := strings.Repeat(unit, keyname.MaxKeyBytes/len(unit)) + strings.Repeat("x", keyname.MaxKeyBytes%len(unit))
	require.Len(t, longest, keyname.MaxKeyBytes)
	for id, v := range map[string]string{"o-longest": longest, "o-over": longest + "y"} {
		body, err := json.Marshal(map[string]string{"orderId": id, field: v})
		require.NoError(t, err)
		names, err := searchkey.Names(ctx, d, body, nil)
		require.NoError(t, err)
		created, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: string(body), Workflow: d, Search: names, Now: t0})
		require.NoError(t, err)
		require.True(t, created)
		found, err := searchkey.Lookup(ctx, db, "", nil, v)
		require.NoError(t, err)
		require.Equal(t, []string{id}, allWithField(t, s, field, found, 10))
	}
}
