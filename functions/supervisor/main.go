// Command supervisor is the Supervisor Lambda, invoked by an EventBridge
// scheduled rule: it recovers overdue steps.
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
		log.Fatalf("supervisor: %v", err)
	}
	lambda.Start(deployment.Traced(d, d.Supervisor(deployment.InstanceID()).Handle))
}
