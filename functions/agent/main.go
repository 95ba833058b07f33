// Command agent is an HTTP Agent Lambda: it wraps the remote service named
// by SAS_AGENT_NAME, claiming the steps its request queue names, calling
// the endpoint its workflow file declares with its credentials, and
// replying on its response queue.
package main

import "github.com/sas-go/sas/shared/agentmain"

func main() { agentmain.Start(nil) }
