package dynamoexpr_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	x "github.com/sas-go/sas/shared/dynamoexpr"
)

// A write's clauses come out in DynamoDB's order (SET, REMOVE, ADD,
// DELETE), its conditions joined by AND, each name aliased once however
// often it is used, and a map's keys aliased whatever they hold (a holder's
// ID has dots and slashes).
func TestAWriteIsRenderedFromItsParts(t *testing.T) {
	t.Parallel()
	b := x.New()
	holders, n := b.Name("Holders"), b.Name("N")
	h := b.Key(holders, "o-1/0.false.0#1.1")
	b.Set(h, b.Int(1700))
	b.Set(n, x.Plus(n, b.Int(1)))
	b.Remove(b.Key(holders, "o-2/0.false.0#1.1"))
	b.Add(b.Plain("Ua"), b.Value(&types.AttributeValueMemberSS{Value: []string{"s0"}}))
	b.Delete(b.Plain("Ub"), b.Value(&types.AttributeValueMemberSS{Value: []string{"s1"}}))
	b.If(x.NotExists(h), x.Less(n, b.Int(3)))
	b.If(x.Or(x.NotExists(b.Name("Waiting")), x.Equal(x.Size(b.Name("Waiting")), b.Int(0))))
	b.If(x.Contains(b.Plain("Ua"), b.String("s0")))
	e, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, "SET #0.#2=:0,#1=#1+:1 REMOVE #0.#3 ADD Ua :2 DELETE Ub :3", e.Update)
	require.Equal(t, "attribute_not_exists(#0.#2) AND #1<:4 AND (attribute_not_exists(#4) OR size(#4)=:5) AND contains(Ua,:6)",
		e.Condition)
	require.Equal(t, map[string]string{"#0": "Holders", "#2": "o-1/0.false.0#1.1", "#1": "N", "#3": "o-2/0.false.0#1.1",
		"#4": "Waiting"}, e.Names)
	require.Len(t, e.Values, 7)
	require.Equal(t, &types.AttributeValueMemberN{Value: "1700"}, e.Values[":0"])
}

// The same string or number has one placeholder, however many fields are
// set to it or tested against it: a write that changes many records stays
// short. Other kinds get their own.
func TestEqualValuesShareAPlaceholder(t *testing.T) {
	t.Parallel()
	b := x.New()
	r := b.Plain("R")
	for _, rec := range []string{"s0", "s1", "s2"} {
		p := b.Key(r, rec)
		b.Set(b.Field(p, "s"), b.String("Pending"))
		b.Set(b.Field(p, "fc"), b.Int(0))
		b.Set(b.Field(p, "ev"), x.ListAppend(x.IfNotExists(b.Field(p, "ev"), b.Value(&types.AttributeValueMemberL{})),
			b.Value(&types.AttributeValueMemberL{})))
	}
	b.If(x.Equal(b.Plain("St"), b.String("Pending")), x.Not(x.And(x.Exists(b.Plain("Hu")), x.Greater(b.Plain("V"), b.Int(0)))))
	e, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, "SET R.#0.s=:0,R.#0.fc=:1,R.#0.ev=list_append(if_not_exists(R.#0.ev,:2),:3),"+
		"R.#1.s=:0,R.#1.fc=:1,R.#1.ev=list_append(if_not_exists(R.#1.ev,:4),:5),"+
		"R.#2.s=:0,R.#2.fc=:1,R.#2.ev=list_append(if_not_exists(R.#2.ev,:6),:7)", e.Update)
	require.Equal(t, "St=:0 AND NOT (attribute_exists(Hu) AND V>:1)", e.Condition)
	require.Len(t, e.Values, 8)
}

// A name that is not plain (a hyphen, a leading digit, nothing) is aliased
// even where its caller asked for it plain: DynamoDB would refuse it.
func TestANameThatIsNotPlainIsAliased(t *testing.T) {
	t.Parallel()
	b := x.New()
	b.Set(b.Plain("a-b"), b.Int(1))
	b.Set(b.Field(b.Plain("P"), "0"), b.Int(1))
	b.Set(b.Plain("_ok9"), b.Bool(true))
	e, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, "SET #0=:0,P.#1=:0,_ok9=:1", e.Update)
	require.Equal(t, map[string]string{"#0": "a-b", "#1": "0"}, e.Names)
}

// Only the placeholders the expressions use are sent (DynamoDB refuses a
// request with one it does not use): a name or a value made for a clause
// its caller then left out is dropped; a condition alone, a key
// condition, is an expression too.
func TestOnlyUsedPlaceholdersAreSent(t *testing.T) {
	t.Parallel()
	b := x.New()
	_ = b.Name("unused")
	_ = b.Int(7)
	b.If(x.Equal(b.Name("OrderID"), b.String("~agent/a")), x.BeginsWith(b.Name("SK"), b.String("key")))
	e, err := b.Build()
	require.NoError(t, err)
	require.Empty(t, e.Update)
	require.Equal(t, "#1=:1 AND begins_with(#2,:2)", e.Condition)
	require.Equal(t, map[string]string{"#1": "OrderID", "#2": "SK"}, e.Names)
	require.Len(t, e.Values, 2)
	_, ok := e.Values[":0"]
	require.False(t, ok)
}

// An expression of MaxBytes is built; one byte more is ErrTooLarge, for
// the update and the condition alike, and Len says the size before.
func TestTheLimitIsMetAtBothEnds(t *testing.T) {
	t.Parallel()
	// "SET " and "=:0" around a plain name of n bytes.
	update := func(n int) *x.Builder {
		b := x.New()
		b.Set(b.Plain(strings.Repeat("a", n)), b.Int(1))
		return b
	}
	u, _ := update(x.MaxBytes - 7).Len()
	require.Equal(t, x.MaxBytes, u)
	_, err := update(x.MaxBytes - 7).Build()
	require.NoError(t, err)
	_, err = update(x.MaxBytes - 6).Build()
	require.ErrorIs(t, err, x.ErrTooLarge)

	// "attribute_exists(" and ")" around a plain name of n bytes.
	cond := func(n int) *x.Builder {
		b := x.New()
		b.Set(b.Plain("a"), b.Int(1))
		b.If(x.Exists(b.Plain(strings.Repeat("c", n))))
		return b
	}
	_, c := cond(x.MaxBytes - 18).Len()
	require.Equal(t, x.MaxBytes, c)
	_, err = cond(x.MaxBytes - 18).Build()
	require.NoError(t, err)
	_, err = cond(x.MaxBytes - 17).Build()
	require.True(t, errors.Is(err, x.ErrTooLarge))
}

// UpdateInput is the UpdateItem of the built write; one with no condition
// sends none.
func TestAnUpdateInputCarriesTheExpressions(t *testing.T) {
	t.Parallel()
	b := x.New()
	b.Set(b.Name("Limit"), b.Int(2))
	key := map[string]types.AttributeValue{"OrderID": &types.AttributeValueMemberS{Value: "o"}}
	in, err := b.UpdateInput("state", key)
	require.NoError(t, err)
	require.Equal(t, "state", *in.TableName)
	require.Equal(t, "SET #0=:0", *in.UpdateExpression)
	require.Nil(t, in.ConditionExpression)
	require.Equal(t, key, in.Key)
}
