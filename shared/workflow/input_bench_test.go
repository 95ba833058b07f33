package workflow_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sas-go/sas/shared/workflow"
)

// BenchmarkInputOfTheLargestDocument is what a step's input costs the Agent
// at the limits: a 16 MB order and a 16 MB result before it, the whole
// document (no input expression) and a jq projection of it. Its B/op is
// the memory the Agent allocates for the input beside the document itself
// (go test -run '^$' -bench InputOfTheLargestDocument -benchmem ./shared/workflow).
func BenchmarkInputOfTheLargestDocument(b *testing.B) {
	order := json.RawMessage(`{"orderId":"o","doc":"` + strings.Repeat("d", workflow.MaxResultLimit-40) + `"}`)
	result := json.RawMessage(`{"pages":"` + strings.Repeat("p", workflow.MaxResultLimit-40) + `"}`)
	doc := workflow.Document{Order: order, Results: map[string]json.RawMessage{"scan": result}}
	for _, c := range []struct{ name, input string }{{"whole", ""}, {"jq", "{id: .order.orderId, n: (.results.scan.pages | length)}"}} {
		b.Run(c.name, func(b *testing.B) {
			a := workflow.Action{Name: "file", Input: c.input}
			for b.Loop() {
				in, err := a.InputFor(doc)
				if err != nil || len(in) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// A document's parts, joined, are the document json.Marshal makes of it
// (the same members and values), whatever it holds.
func TestADocumentsPartsAreItsJSON(t *testing.T) {
	t.Parallel()
	index := 2
	for _, doc := range []workflow.Document{
		{},
		{Order: json.RawMessage(`{"orderId":"o"}`)},
		{Order: json.RawMessage(`{"orderId":"o"}`), Results: map[string]json.RawMessage{"b": json.RawMessage(`[1]`), "a\"x": json.RawMessage(`"s"`)},
			Result: json.RawMessage(`{"r":true}`), Item: json.RawMessage(`{"sku":"A"}`), Index: &index},
	} {
		parts, err := doc.Parts()
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(func() []string {
			var out []string
			for _, p := range parts {
				out = append(out, string(p))
			}
			return out
		}(), "")
		if doc.Results == nil {
			doc.Results = map[string]json.RawMessage{}
		}
		want, _ := json.Marshal(doc)
		var got, wanted any
		if err := json.Unmarshal([]byte(joined), &got); err != nil {
			t.Fatalf("%s: %v", joined, err)
		}
		_ = json.Unmarshal(want, &wanted)
		if !reflect.DeepEqual(got, wanted) {
			t.Fatalf("parts %s, want %s", joined, want)
		}
		whole, err := doc.JSON()
		if err != nil || string(whole) != joined {
			t.Fatalf("JSON %s, parts %s (%v)", whole, joined, err)
		}
	}
}
