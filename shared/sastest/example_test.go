package sastest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sas-go/sas/shared/sastest"
	"github.com/sas-go/sas/shared/workflow"
)

// order is a shop order of the examples' schema.
const order = `{"orderId":"o-1","customerId":"c-7","items":[{"sku":"A-1","quantity":2,"unitPriceCents":499},{"sku":"B-2","quantity":1,"unitPriceCents":1250}]}`

// The approval example: the inventory is reserved, the order waits up to
// 72 hours for an approval, then the approved amount is charged. Three
// days pass in no time.
func Example_approval() {
	t := &testing.T{}
	k := sastest.NewOf(t, workflow.MustExample("approval"))
	k.Handle("inventory", func(c sastest.Call) sastest.Answer { return sastest.OK(map[string]string{"reservation": "r-1"}) })
	k.Handle("payment", func(c sastest.Call) sastest.Answer {
		fmt.Printf("%s %s %s\n", c.Agent, c.Action, c.Input)
		return sastest.OK(map[string]string{"charge": "ch-1"})
	})
	o := k.Submit(order)
	k.Run() // reserved, then waiting for its approval
	fmt.Println(o.State(), "waiting since", k.Now().Format(time.TimeOnly))
	k.Advance(48 * time.Hour)
	_ = k.Signal("o-1", "approved", map[string]any{"amountCents": 2248, "by": "ana"})
	k.Run()
	fmt.Println(o.State(), "at", k.Now().Format(time.DateTime))
	fmt.Println(string(o.Result("charge-approved")))

	// Without an approval, the wait times out after 72 h: the reservation
	// is released.
	late := sastest.NewOf(t, workflow.MustExample("approval"))
	o = late.Submit(order)
	late.Advance(72 * time.Hour)
	fmt.Println(o.State(), o.Undone())
	// Output:
	// Pending waiting since 09:00:00
	// payment charge-payment {"amountCents":2248,"approvedBy":"ana","customerId":"c-7","orderId":"o-1"}
	// Processed at 2026-01-03 09:00:00
	// {"charge":"ch-1"}
	// Failed [release-inventory]
}

// The parallel example: two reservations and an authorization at once, the
// charge when all three are done, a packing per item, then the shipment.
// The shipping service refuses: what completed is undone, the latest
// first.
func Example_parallel() {
	k := sastest.NewOf(&testing.T{}, workflow.MustExample("parallel"))
	k.Handle("shipping", func(sastest.Call) sastest.Answer { return sastest.Refuse("no courier") })
	o := k.Submit(order)
	k.Run()
	for _, c := range k.Calls("") {
		fmt.Println(c.Step, c.Action)
	}
	fmt.Println(o.State(), o.Undone())
	// Output:
	// reserve-east reserve-inventory
	// reserve-west reserve-inventory
	// authorize-payment authorize-payment
	// charge-payment charge-payment
	// pack-item#1 pack-item
	// pack-item#2 pack-item
	// create-shipment create-shipment
	// unpack-item#2 unpack-item
	// unpack-item#1 unpack-item
	// refund-payment refund-payment
	// void-authorization void-authorization
	// release-west release-inventory
	// release-east release-inventory
	// Failed [unpack-item#2 unpack-item#1 refund-payment void-authorization release-west release-east]
}
