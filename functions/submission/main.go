// Command submission is the Submission Lambda: orders queue → state store.
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
		log.Fatalf("submission: %v", err)
	}
	h, err := d.Submission()
	if err != nil {
		log.Fatalf("submission: %v", err)
	}
	lambda.Start(deployment.Traced(d, h.Handle))
}
