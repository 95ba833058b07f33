package dynamoexpr_test

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
)

// A write that names each changed field is the cheapest while it changes a
// few; past MaxBytes it is written in a form that does not grow with its
// fields (each record whole, on the condition that the item is the version
// it was decided on), as the state store's Apply does.
func Example_fallback() {
	fields := func(records int) *x.Builder {
		b := x.New()
		for i := range records {
			r := b.Key(b.Plain("R"), "s"+strconv.Itoa(i))
			b.Set(b.Field(r, "s"), b.String("Pending"))
			b.Set(b.Field(r, "ra"), b.Int(1700000000000))
		}
		return b
	}
	whole := func(records int, version int64) *x.Builder {
		b := x.New()
		all := map[string]types.AttributeValue{}
		for i := range records {
			all["s"+strconv.Itoa(i)] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"s": &types.AttributeValueMemberS{Value: "Pending"}}}
		}
		b.Set(b.Plain("R"), b.Value(&types.AttributeValueMemberM{Value: all}))
		b.If(x.Equal(b.Plain("V"), b.Int(version)))
		return b
	}
	for _, records := range []int{3, 300} {
		e, err := fields(records).Build()
		form := "field by field"
		if errors.Is(err, x.ErrTooLarge) {
			e, err = whole(records, 7).Build()
			form = "whole"
		}
		fmt.Println(records, form, len(e.Update) <= x.MaxBytes, err)
	}
	// Output:
	// 3 field by field true <nil>
	// 300 whole true <nil>
}
