// Command scheduler is the Scheduler Lambda: scheduler queue and agent
// response queues → agent requests, completions and compensation.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sas-go/sas/shared/deployment"
)

func main() {
	d, err := deployment.FromLambdaEnv(context.Background())
	if err != nil {
		log.Fatalf("scheduler: %v", err)
	}
	h, err := d.Scheduler()
	if err != nil {
		log.Fatalf("scheduler: %v", err)
	}
	lambda.Start(deployment.Traced(d, h.Handle))
}
