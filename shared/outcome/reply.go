package outcome

import (
	"encoding/json"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// Reply is the reply that hands outcome a, recorded as rec on an order
// running def, to the Scheduler, which tells the order's caller (and the
// operator, for a refusal) and starts what rec made ready. It names the
// record as a does, a forEach step's item included, so that its status
// message, its sequence number and its alert are the item's. result is the
// record's result (a refusal carries none); payload is the order, if the
// sender has it. Every recorded reply is built here: the Agent's for its
// attempt, Submission's for an event or an async callback.
func Reply(def workflow.Definition, a Attempt, rec Recorded, result, payload json.RawMessage) message.AgentReply {
	reply := message.AgentReply{Kind: message.KindReply, OrderID: a.OrderID,
		Step: a.Ref.Index, Undo: a.Ref.Undo, Item: a.Ref.Item, StepName: a.Name, Attempt: a.Attempt,
		OK: a.Refusal == "", Error: a.Refusal, ReplyTo: rec.ReplyQueue, Round: rec.Round,
		Workflow: def.Name, Version: def.Version, Payload: payload,
		Recorded: true, State: string(rec.State), Ready: message.Starts(rec.Ready)}
	if reply.OK {
		reply.Result = result
	}
	return reply
}
