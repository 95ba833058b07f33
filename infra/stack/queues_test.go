package stack_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireQueueKeyUse asserts that no role of a stack with a key (arn) may
// use it without a condition (CDK's SqsEventSource gave each queue's
// consumer kms:Decrypt on the key with none), and that each role's use of
// it through SQS is for its own queues alone, SQS's encryption context
// (aws:sqs:arn) naming them: kms:GenerateDataKey and kms:Decrypt for the
// queues it sends to (its sqs:SendMessage's), kms:Decrypt for those its
// event source mappings take from (and the consumer's actions on those
// alone); the Supervisor takes from none.
func requireQueueKeyUse(t *testing.T, tmpl map[string]any, arn any) {
	t.Helper()
	mapped := map[string][]string{} // by role, the queues its function's mappings take from
	for id, e := range of(tmpl, "AWS::Lambda::EventSourceMapping") {
		fn := e["FunctionName"].(map[string]any)["Ref"].(string)
		role := roleOf(strings.TrimRight(fn, "0123456789ABCDEF") + "Role")
		require.NotEmpty(t, role, id)
		mapped[role] = append(mapped[role], asList(e["EventSourceArn"])...)
	}
	viaSQS := map[string]any{"kms:ViaService": map[string]any{"Fn::Sub": "sqs.${AWS::Region}.amazonaws.com"}}
	roles := 0
	for id, p := range of(tmpl, "AWS::IAM::Policy") {
		role := roleOf(id)
		var sends, takes []string
		bySid := map[string]map[string]any{}
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			actions := asList(st["Action"])
			switch {
			case slices.Equal(actions, []string{"sqs:SendMessage"}):
				sends = asList(st["Resource"])
			case slices.Contains(actions, "sqs:ReceiveMessage"):
				takes = asList(st["Resource"])
			}
			if slices.ContainsFunc(actions, func(a string) bool { return strings.HasPrefix(a, "kms:") }) {
				require.NotNil(t, st["Condition"], "%s: %v: no use of the key without a condition", id, st)
				require.Equal(t, arn, st["Resource"], id)
				if sid, _ := st["Sid"].(string); strings.HasPrefix(sid, "QueueKey") {
					bySid[sid] = normalizeActions(st)
				}
			}
		}
		slices.Sort(mapped[role])
		require.Equal(t, mapped[role], slices.Sorted(slices.Values(takes)), "%s: it consumes what its mappings take from, and no more", id)
		require.NotEmpty(t, sends, id)
		require.Equal(t, queueKey("QueueKeyToSend", arn, []any{"kms:GenerateDataKey", "kms:Decrypt"}, viaSQS, sends), bySid["QueueKeyToSend"], id)
		if role == "Supervisor" {
			require.Empty(t, takes)
			require.NotContains(t, bySid, "QueueKeyToReceive", id)
		} else {
			require.Equal(t, queueKey("QueueKeyToReceive", arn, []any{"kms:Decrypt"}, viaSQS, takes), bySid["QueueKeyToReceive"], id)
		}
		roles++
	}
	require.Equal(t, len(expected), roles, "every function's role")
}

// queueKey is a QueueKey statement as the template has it, its queues
// given as asList prints them.
func queueKey(sid string, arn any, actions []any, via map[string]any, queues []string) map[string]any {
	var arns []any
	for _, q := range queues {
		var v any = q
		if strings.HasPrefix(q, "{") {
			_ = json.Unmarshal([]byte(q), &v)
		}
		arns = append(arns, v)
	}
	return map[string]any{"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": arn, "Condition": map[string]any{
		"StringEquals": via,
		"StringLike":   map[string]any{"kms:EncryptionContext:aws:sqs:arn": arns},
	}}
}
