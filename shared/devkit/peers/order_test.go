package main

import (
	"testing"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/peers/harness"
)

// Every engine sends the product's demo order: the harness's copy (it
// cannot import the product: the Temporal engine's module must not take
// its dependencies) is the same JSON.
func TestTheOrderIsTheProductsDemoOrder(t *testing.T) {
	for i := range 2000 {
		id := "o-" + string(rune('a'+i%26))
		if got, want := harness.OrderBody(id, i), localrun.DemoOrder(id, i).JSON(); got != want {
			t.Fatalf("order %d: the harness sends %s, the product's demo %s", i, got, want)
		}
	}
}
