// Command loyalty is an Agent written in Go: the fulfilment workflow's
// loyalty agent (custom: true in its workflow file) runs points.Service in
// place of an HTTP call. The stack deploys build/loyalty for it; a team's
// own Go agent is this file with its own Remote.
package main

import (
	"github.com/sas-go/sas/functions/loyalty/points"
	"github.com/sas-go/sas/shared/agentmain"
)

func main() { agentmain.Start(points.Service{}) }
