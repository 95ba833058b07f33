package workflow_test

import (
	"encoding/json"
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
