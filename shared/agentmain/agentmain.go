// Package agentmain is an Agent Lambda's main: the generic HTTP agent's
// (functions/agent) and a Go agent's (functions/loyalty), one line each.
package agentmain

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/agentauth"
	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/workflow"
)

// EnvAgentName names the agent a function runs.
const EnvAgentName = "SAS_AGENT_NAME"

// Start runs the Agent of the agent SAS_AGENT_NAME names: custom, nil for
// an HTTP agent (its endpoint and credentials are in its workflow file), or
// the Go code of an agent its workflow file marks custom: true. A
// configuration that does not hold, or a credential that cannot be read,
// fails the cold start with the reason.
func Start(custom agent.Remote) {
	ctx := context.Background()
	d, err := deployment.FromLambdaEnv(ctx)
	if err != nil {
		log.Fatalf("agent: %v", err)
	}
	name := os.Getenv(EnvAgentName)
	if name == "" {
		log.Fatalf("agent: %s is not set", EnvAgentName)
	}
	if custom != nil {
		d.Remotes = map[string]agent.Remote{name: custom}
	}
	clients := agentauth.NewClients(d.Clients.Config)
	d.Auth = func(ctx context.Context, a workflow.Agent) (agent.Authorizer, error) {
		return agentauth.For(ctx, clients, a)
	}
	h, err := d.Agent(ctx, name, deployment.InstanceID())
	if err != nil {
		log.Fatalf("agent: %v", err)
	}
	lambda.Start(deployment.Traced(d, h.Handle))
}
