package topology

// AgentPartition is the state table's partition key of agent's own items:
// its flow control and rate schedule (shared/flow), its key lines
// (shared/keyline) and the secret its keys are named by (shared/keyname).
// No order id starts with "~", so no order's item is among them.
func AgentPartition(agent string) string { return "~agent/" + agent }

// SearchPartition is the state table's partition key of the index items of
// the orders whose searchable field (workflow.Definition.Search) is kept as
// name (its value, or a keyed hash of it): one item per order, its sort key
// the order's id, so that a Query of the partition reads only the orders of
// that value. A field of the same path in two workflows (customerId) shares
// its partitions: a search by it finds the orders of both. No order id
// starts with "~", nor does a field path hold "/", so the key is no
// order's and no other field's.
func SearchPartition(field, name string) string {
	return "~search/" + field + "/" + name
}
