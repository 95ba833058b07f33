package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/sas-go/sas/shared/client"
	"github.com/sas-go/sas/shared/shop"
)

// An application submits an order to the deployment named sas (AWS, with
// the SDK's configuration), and reads where it stands.
func Example() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Prefix: "sas"})
	if err != nil {
		log.Fatal(err)
	}
	id, err := c.Submit(ctx, shop.Order{OrderID: "o-1", CustomerID: "c-7",
		Items: []shop.Item{{SKU: "A-1", Quantity: 2, UnitPriceCents: 499}}})
	var rejected *client.RejectedError
	if errors.As(err, &rejected) {
		log.Fatalf("not sent: %s", rejected.Reason)
	}
	st, err := c.Status(ctx, id)
	if errors.Is(err, client.ErrNotFound) {
		fmt.Println("not stored yet: Submission takes it from the queue")
		return
	}
	fmt.Println(st.Order.State)
}

// The approval a workflow waits for, sent by the application that took it.
func ExampleClient_Signal() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Prefix: "sas"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Signal(ctx, "o-1", "approved", map[string]any{"amountCents": 1998, "by": "ana"}, "approval-o-1")
	if errors.Is(err, client.ErrNotFound) {
		log.Fatal("no order o-1")
	}
}

// A cancel an order may refuse.
func ExampleClient_Cancel() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Prefix: "sas"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Cancel(ctx, "o-1", "shop-frontend", "customer asked")
	var refused *client.NotCancellableError
	if errors.As(err, &refused) {
		fmt.Println("not cancelled:", refused.Reason)
	}
}
