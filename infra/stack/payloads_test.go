package stack_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/infra/stack"
)

// A payload outlives its order's round (the deadline), its compensation (as
// long again) and its retention, in whole days and a day more; an order
// kept forever keeps its payloads forever.
func TestPayloadExpiryDays(t *testing.T) {
	for _, c := range []struct {
		retention      int
		deadline, hold time.Duration
		want           int
	}{
		{90, 24 * time.Hour, 0, 90 + 2 + 1},
		{30, 30 * time.Hour, 0, 30 + 3 + 1}, // 60h: 3 days, rounded up
		{30, 36 * time.Hour, 0, 30 + 3 + 1},
		{7, 72 * time.Hour, 0, 7 + 6 + 1},
		{1, time.Minute, 0, 1 + 1 + 1},
		{0, 24 * time.Hour, 0, 0},
		{1, 96 * time.Hour, 96 * time.Hour, 1 + 12 + 1},  // held as long as its deadline
		{30, 30 * time.Hour, 12 * time.Hour, 30 + 3 + 1}, // 72h: 3 days
		{30, 30 * time.Hour, 13 * time.Hour, 30 + 4 + 1},
		{0, 24 * time.Hour, 24 * time.Hour, 0},
	} {
		require.Equal(t, c.want, stack.PayloadExpiryDays(c.retention, c.deadline, c.hold), "retention %d, deadline %s, hold %s", c.retention, c.deadline, c.hold)
	}
}

// With a retention shorter than a sender's body must be kept, the orders'
// payloads go with it, and a body a sender offloaded (under incoming/, or
// at the bucket's root, as the Python Extended Client keys it by default)
// still stays while its pointer message may wait in a queue or a DLQ.
func TestAShortRetentionTakesNoSendersBodyBeforeItsMessage(t *testing.T) {
	got := synthContext(t, map[string]any{"retentionDays": "1"})
	b := resourceOf(t, got, "AWS::S3::Bucket", "PayloadBucket")["Properties"].(map[string]any)
	rules := b["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
	require.Equal(t, []any{
		map[string]any{"Id": "payloads", "Status": "Enabled", "ExpirationInDays": float64(stack.IncomingDays),
			"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1.0}},
		map[string]any{"Id": "incoming", "Prefix": "incoming/", "Status": "Enabled", "ExpirationInDays": float64(stack.IncomingDays)},
		map[string]any{"Id": "orders", "Prefix": "orders/", "Status": "Enabled", "ExpirationInDays": float64(1 + 2 + 1)},
	}, rules, "1 day, 2 x the order workflow's 24h, and one")
	require.Less(t, 1+2+1, stack.IncomingDays, "shorter than a sender's body is kept")
}

// resourceOf is a template's resource (its type, properties and policies)
// whose logical id starts with prefix.
func resourceOf(t *testing.T, tmpl map[string]any, typ, prefix string) map[string]any {
	t.Helper()
	for id, r := range tmpl["Resources"].(map[string]any) {
		if res := r.(map[string]any); res["Type"] == typ && strings.HasPrefix(id, prefix) {
			return res
		}
	}
	t.Fatalf("no %s %s*", typ, prefix)
	return nil
}

// payloadRule is the payload bucket's lifecycle rule of every object, as
// its payloads see it (their expiry), checked beside the others: a body a
// sender offloaded under incoming/ goes after IncomingDays, once its
// message can no longer be in a queue; the orders' payloads, when they
// expire, after their days; anything else with them, never sooner than a
// body under incoming/.
func payloadRule(t *testing.T, tmpl map[string]any) map[string]any {
	t.Helper()
	b := resourceOf(t, tmpl, "AWS::S3::Bucket", "PayloadBucket")["Properties"].(map[string]any)
	rules := b["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
	all := rules[0].(map[string]any)
	require.Equal(t, "payloads", all["Id"])
	require.Nil(t, all["Prefix"], "every object")
	require.Equal(t, map[string]any{"Id": "incoming", "Prefix": "incoming/", "ExpirationInDays": float64(stack.IncomingDays), "Status": "Enabled"},
		rules[1], "a body a sender offloaded goes once its message can no longer be in a queue")
	days, expires := all["ExpirationInDays"].(float64)
	if !expires {
		require.Len(t, rules, 2, "orders kept forever: their payloads too")
		return all
	}
	require.Len(t, rules, 3, "every object's, the offloaded bodies', the orders' payloads'")
	orders := rules[2].(map[string]any)
	require.Equal(t, "orders", orders["Id"])
	require.Equal(t, "orders/", orders["Prefix"])
	require.Equal(t, max(orders["ExpirationInDays"].(float64), stack.IncomingDays), days,
		"anything else with the payloads, never sooner than a body under incoming/")
	out := maps.Clone(all)
	out["ExpirationInDays"] = orders["ExpirationInDays"]
	return out
}

// The payload bucket is private, TLS only, not versioned, under S3's keys
// (no kms context), kept when the stack is deleted, and its objects expire
// with their orders; multipart uploads left over go after a day. Its access
// logs go to a bucket of their own, which takes them from it alone. Every
// function knows its name and the inline limit, and the stack outputs it.
func TestThePayloadBucket(t *testing.T) {
	buckets := resources("AWS::S3::Bucket")
	require.Len(t, buckets, 2, "the payloads and their access logs")
	bucket := resourceOf(t, tmpl, "AWS::S3::Bucket", "PayloadBucket")
	logs := resourceOf(t, tmpl, "AWS::S3::Bucket", "PayloadAccessLogs")
	blocked := map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true}
	s3Managed := map[string]any{"ServerSideEncryptionConfiguration": []any{
		map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}}}}
	for name, b := range map[string]map[string]any{"payloads": bucket, "access logs": logs} {
		require.Equal(t, "Retain", b["DeletionPolicy"], name)
		require.Equal(t, "Retain", b["UpdateReplacePolicy"], name)
		p := b["Properties"].(map[string]any)
		require.Equal(t, blocked, p["PublicAccessBlockConfiguration"], name)
		require.Equal(t, s3Managed, p["BucketEncryption"], name)
		require.Nil(t, p["VersioningConfiguration"], name)
		require.Nil(t, p["BucketName"], "%s: a name CloudFormation makes (bucket names are global)", name)
	}
	require.Equal(t, map[string]any{"Id": "payloads", "Status": "Enabled", "ExpirationInDays": float64(90 + 2 + 1),
		"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1.0}}, payloadRule(t, tmpl),
		"the default retention (90 days) and the order workflow's deadline (24h)")
	require.Equal(t, []any{map[string]any{"Id": "expire", "Status": "Enabled", "ExpirationInDays": float64(stack.AccessLogDays)}},
		logs["Properties"].(map[string]any)["LifecycleConfiguration"].(map[string]any)["Rules"])
	logging := bucket["Properties"].(map[string]any)["LoggingConfiguration"].(map[string]any)
	require.Contains(t, logging["DestinationBucketName"].(map[string]any)["Ref"], "PayloadAccessLogs")
	require.Equal(t, "payloads/", logging["LogFilePrefix"])

	for _, who := range []string{"PayloadBucketPolicy", "PayloadAccessLogsPolicy"} {
		b, _ := json.Marshal(resourceOf(t, tmpl, "AWS::S3::BucketPolicy", who))
		require.Contains(t, string(b), `"aws:SecureTransport":"false"`, who)
		require.Contains(t, string(b), `"Effect":"Deny"`, who)
	}
	b, _ := json.Marshal(resourceOf(t, tmpl, "AWS::S3::BucketPolicy", "PayloadAccessLogsPolicy"))
	require.Contains(t, string(b), `"Principal":{"Service":"logging.s3.amazonaws.com"}`)
	require.Contains(t, string(b), `"aws:SourceArn":{"Fn::GetAtt":["PayloadBucket`, "from the payload bucket only")
	b, _ = json.Marshal(resourceOf(t, tmpl, "AWS::S3::BucketPolicy", "PayloadBucketPolicy"))
	require.NotContains(t, string(b), `"Effect":"Allow"`, "the roles' own policies grant the functions theirs")

	for id, f := range resources("AWS::Lambda::Function") {
		env := f["Environment"].(map[string]any)["Variables"].(map[string]any)
		require.Contains(t, env["SAS_PAYLOAD_BUCKET"].(map[string]any)["Ref"], "PayloadBucket", id)
		require.Equal(t, "32768", env["SAS_PAYLOAD_INLINE_BYTES"], id)
	}
	out := tmpl["Outputs"].(map[string]any)["PayloadBucketName"].(map[string]any)
	require.Contains(t, out["Value"].(map[string]any)["Ref"], "PayloadBucket")
}

// The expiry counts the longest deadline of the deployment's workflows
// (two files: 20h and 30h) and their longest hold (20h), context
// payloadInlineBytes reaches every function, and an agent's memory: is its
// function's, its GOMEMLIMIT four fifths of it.
func TestThePayloadBucketExpiresAfterTheLongestDeadline(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for name, deadline := range map[string]string{"quick": "20h", "slow": "30h"} {
		f := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(f, []byte(`name: `+name+`
deadline: `+deadline+`
agents:
  stock: {endpoint: "https://stock.example.com", memory: 1024}
steps:
  - {name: one, agent: stock, timeout: 10s, onFailure: hold}
`), 0o644))
		files = append(files, f)
	}
	slices.Sort(files)
	got := synthContext(t, map[string]any{"workflows": strings.Join(files, ","), "retentionDays": "30", "payloadInlineBytes": "4096"})
	require.EqualValues(t, 30+4+1, payloadRule(t, got)["ExpirationInDays"],
		"30 days, 2 x 30h and a hold as long as slow's deadline (30h: holdFor's default) in whole days, and one")
	stock := 0
	for id, f := range of(got, "AWS::Lambda::Function") {
		require.Equal(t, "4096", f["Environment"].(map[string]any)["Variables"].(map[string]any)["SAS_PAYLOAD_INLINE_BYTES"], id)
		if strings.HasPrefix(id, "AgentStock") {
			stock++
			require.EqualValues(t, 1024, f["MemorySize"], id)
			require.Equal(t, "819MiB", f["Environment"].(map[string]any)["Variables"].(map[string]any)["GOMEMLIMIT"], id)
		}
	}
	require.Equal(t, 1, stock, "the agent's function")
}

// bucketObjects names a resource of the payload bucket's objects as
// "bucket/<pattern>" (anything else as its JSON).
func bucketObjects(v any) string {
	b, _ := json.Marshal(v)
	m, _ := v.(map[string]any)
	if att, _ := m["Fn::GetAtt"].([]any); len(att) == 2 && strings.HasPrefix(att[0].(string), "PayloadBucket") && att[1] == "Arn" {
		return "bucket"
	}
	join, _ := m["Fn::Join"].([]any)
	if len(join) != 2 {
		return string(b)
	}
	parts, _ := join[1].([]any)
	if len(parts) != 2 {
		return string(b)
	}
	arn, _ := parts[0].(map[string]any)
	att, _ := arn["Fn::GetAtt"].([]any)
	suffix, _ := parts[1].(string)
	if len(att) != 2 || !strings.HasPrefix(att[0].(string), "PayloadBucket") || att[1] != "Arn" {
		return string(b)
	}
	return "bucket" + suffix
}

// expectedS3 is each role's every S3 grant, as "action on resource".
var expectedS3 = map[string][]string{
	"Submission":     {"s3:GetObject on bucket/*", "s3:ListBucket on bucket", "s3:PutObject on bucket/orders/*"},
	"Scheduler":      {"s3:GetObject on bucket/orders/*", "s3:ListBucket on bucket"},
	"Supervisor":     {"s3:GetObject on bucket/orders/*", "s3:ListBucket on bucket"},
	"AgentInventory": {"s3:GetObject on bucket/orders/*", "s3:ListBucket on bucket", "s3:PutObject on bucket/orders/*"},
	"AgentPayment":   {"s3:GetObject on bucket/orders/*", "s3:ListBucket on bucket", "s3:PutObject on bucket/orders/*"},
	"AgentShipping":  {"s3:GetObject on bucket/orders/*", "s3:ListBucket on bucket", "s3:PutObject on bucket/orders/*"},
}

// s3Grants are a role policy's S3 grants, as "action on resource", sorted.
func s3Grants(policy map[string]any) []string {
	var out []string
	for _, s := range policy["PolicyDocument"].(map[string]any)["Statement"].([]any) {
		st := s.(map[string]any)
		for _, a := range asList(st["Action"]) {
			if !strings.HasPrefix(a, "s3:") {
				continue
			}
			rs, ok := st["Resource"].([]any)
			if !ok {
				rs = []any{st["Resource"]}
			}
			for _, r := range rs {
				out = append(out, a+" on "+bucketObjects(r))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Each function may read (and, Submission and the Agents, write) the
// payloads under orders/, Submission read an SQS Extended Client's objects
// anywhere in the bucket, each reader list the bucket (so that a payload
// gone is answered 404, not 403), and nothing more: no deleting, no other
// bucket.
func TestEachRoleReadsAndWritesOnlyItsPayloads(t *testing.T) {
	policies := resources("AWS::IAM::Policy")
	require.Len(t, policies, len(expectedS3))
	for id, p := range policies {
		role := roleOf(id)
		require.NotEmpty(t, role, id)
		require.Equal(t, expectedS3[role], s3Grants(p), role)
	}
}

// Every function runs with GOMEMLIMIT at four fifths of its memory: an
// Agent's largest document (a 16 MB order and a 16 MB result) is then
// collected within its 128 MB, where Go's default would let its heap grow
// to twice what is live.
func TestEveryFunctionHasAMemoryLimitUnderItsMemory(t *testing.T) {
	fns := resources("AWS::Lambda::Function")
	require.NotEmpty(t, fns)
	for id, f := range fns {
		mb := f["MemorySize"].(float64)
		env := f["Environment"].(map[string]any)["Variables"].(map[string]any)
		require.Equal(t, fmt.Sprintf("%dMiB", int(mb*4/5)), env["GOMEMLIMIT"], id)
	}
}
