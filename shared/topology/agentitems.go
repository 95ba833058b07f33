package topology

// AgentPartition is the state table's partition key of agent's own items:
// its flow control and rate schedule (shared/flow), its key lines
// (shared/keyline) and the secret its keys are named by (shared/keyname).
// No order id starts with "~", so no order's item is among them.
func AgentPartition(agent string) string { return "~agent/" + agent }
