// Command agent is an Agent Lambda: it wraps the remote service named by
// SAS_AGENT_NAME, claiming the steps its request queue names and replying on
// its response queue.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sas-go/sas/shared/deployment"
)

func main() {
	d, err := deployment.FromLambdaEnv(context.Background())
	if err != nil {
		log.Fatalf("agent: %v", err)
	}
	name := os.Getenv("SAS_AGENT_NAME")
	if name == "" || d.Config.RemoteBaseURL == "" {
		log.Fatalf("agent: SAS_AGENT_NAME and %s must be set", deployment.EnvRemoteBaseURL)
	}
	lambda.Start(d.Agent(name, deployment.InstanceID()).Handle)
}
