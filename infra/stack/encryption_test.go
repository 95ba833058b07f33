package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/infra/stack"
)

// ownKey is a customer's key ARN, as context kms takes it.
const ownKey = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// synthKMS synthesizes the stack with context kms=value and cdk-nag's
// checks, and returns the template, its annotations and its file.
func synthKMS(t *testing.T, value string) (map[string]any, assertions.Annotations, string) {
	t.Helper()
	assets := standInAssets(t)
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{
		"prefix": "shop", "assetDir": assets, "kms": value, "alarmEmail": "ops@example.com"}})
	p, err := stack.Config(app)
	require.NoError(t, err)
	st := stack.New(app, "shop-kms", p, nil)
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(nil), nil)
	var out map[string]any
	b, _ := json.Marshal(assertions.Template_FromStack(st, nil).ToJSON())
	require.NoError(t, json.Unmarshal(b, &out))
	path := filepath.Join(t.TempDir(), "template.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return out, assertions.Annotations_FromStack(st), path
}

// With context kms, every table, queue and DLQ, topic, log group and the
// payload bucket is encrypted under the one customer managed key (the
// payload bucket's access logs cannot be), and each function's role may use
// that key only, only through DynamoDB, SQS and SNS, and through S3 only to
// decrypt what it reads and make the data key of what it writes: a key the
// stack creates (rotated, kept when the stack goes, its policy letting
// CloudWatch Logs, alarms and SNS use it) or the customer's own.
func TestYourOwnKeyEncryptsEveryTableQueueTopicAndLogGroup(t *testing.T) {
	for _, c := range []struct {
		kms string
		key func(v any) bool // whether a reference is the key
	}{
		{"create", func(v any) bool { return strings.Contains(fmt.Sprint(v), "DataKey") }},
		{ownKey, func(v any) bool { return fmt.Sprint(v) == ownKey }},
	} {
		t.Run(strings.SplitN(c.kms, ":", 2)[0], func(t *testing.T) {
			tmpl, notes, path := synthKMS(t, c.kms)
			for id, tb := range of(tmpl, "AWS::DynamoDB::Table") {
				sse := tb["SSESpecification"].(map[string]any)
				require.Equal(t, "KMS", sse["SSEType"], id)
				require.True(t, c.key(sse["KMSMasterKeyId"]), "%s: %v", id, sse["KMSMasterKeyId"])
			}
			queues := of(tmpl, "AWS::SQS::Queue")
			require.Len(t, queues, 19, "the work queues, their DLQs and the alert inbox")
			for id, q := range queues {
				require.True(t, c.key(q["KmsMasterKeyId"]), "%s: %v", id, q["KmsMasterKeyId"])
				require.EqualValues(t, stack.DataKeyReuse, q["KmsDataKeyReusePeriodSeconds"], id)
				require.Nil(t, q["SqsManagedSseEnabled"], id)
			}
			topics := of(tmpl, "AWS::SNS::Topic")
			require.Len(t, topics, 2, "alerts and alarms")
			for id, tp := range topics {
				require.True(t, c.key(tp["KmsMasterKeyId"]), "%s: %v", id, tp["KmsMasterKeyId"])
			}
			logs := of(tmpl, "AWS::Logs::LogGroup")
			require.NotEmpty(t, logs)
			for id, lg := range logs {
				require.True(t, c.key(lg["KmsKeyId"]), "%s: %v", id, lg["KmsKeyId"])
			}
			buckets := of(tmpl, "AWS::S3::Bucket")
			require.Len(t, buckets, 2, "the payloads and their access logs")
			for id, b := range buckets {
				sse := b["BucketEncryption"].(map[string]any)["ServerSideEncryptionConfiguration"].([]any)[0].(map[string]any)
				def := sse["ServerSideEncryptionByDefault"].(map[string]any)
				if strings.HasPrefix(id, "PayloadAccessLogs") {
					require.Equal(t, "AES256", def["SSEAlgorithm"], "%s: a server access log's target cannot use SSE-KMS", id)
					continue
				}
				require.Equal(t, "aws:kms", def["SSEAlgorithm"], id)
				require.True(t, c.key(def["KMSMasterKeyID"]), "%s: %v", id, def["KMSMasterKeyID"])
				require.Equal(t, true, sse["BucketKeyEnabled"], "%s: a data key per bucket, not a KMS request per object", id)
			}
			roles := 0
			for id, p := range of(tmpl, "AWS::IAM::Policy") {
				through, throughS3 := false, false
				for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					st := s.(map[string]any)
					if !slices.ContainsFunc(asList(st["Action"]), func(a string) bool { return strings.HasPrefix(a, "kms:") }) {
						continue
					}
					for _, r := range asList(st["Resource"]) {
						require.True(t, c.key(r), "%s: a kms action on the data key only, not %s", id, r)
					}
					if st["Sid"] == "DataKeyThroughTheServices" {
						through = true
						via := fmt.Sprint(st["Condition"])
						for _, svc := range []string{"dynamodb", "sqs", "sns"} {
							require.Contains(t, via, svc+".${AWS::Region}.amazonaws.com", id)
						}
						require.NotContains(t, via, "s3.", id)
					}
					if st["Sid"] == "DataKeyThroughS3" {
						throughS3 = true
						want := []string{"kms:Decrypt"} // a reader of payloads
						if slices.ContainsFunc(expectedS3[roleOf(id)], func(g string) bool { return strings.HasPrefix(g, "s3:PutObject ") }) {
							want = append(want, "kms:GenerateDataKey") // a writer
						}
						require.Equal(t, want, asList(st["Action"]), id)
						require.Equal(t, map[string]any{"StringEquals": map[string]any{
							"kms:ViaService": map[string]any{"Fn::Sub": "s3.${AWS::Region}.amazonaws.com"}}}, st["Condition"], id)
					}
				}
				require.True(t, through, "%s: the function may use the key through the services", id)
				require.True(t, throughS3, "%s: the function may use the key through S3, for the payloads", id)
				roles++
			}
			require.Equal(t, len(expected), roles, "every function's role")
			keys := map[string]map[string]any{}
			for id, r := range tmpl["Resources"].(map[string]any) {
				if res := r.(map[string]any); res["Type"] == "AWS::KMS::Key" {
					keys[id] = res
				}
			}
			if c.kms != "create" {
				require.Empty(t, keys, "the customer's key is theirs: none created")
				jsiiOK(t, func() {
					info := notes.FindInfo(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("key policy must let")))
					require.NotEmpty(t, *info, "synth says what the customer's key policy must allow")
				})
			} else {
				require.Len(t, keys, 1)
				for id, k := range keys {
					require.Equal(t, "Retain", k["DeletionPolicy"], "%s: the retained tables need it", id)
					props := k["Properties"].(map[string]any)
					require.Equal(t, true, props["EnableKeyRotation"], id)
					policy := fmt.Sprint(props["KeyPolicy"])
					for _, who := range []string{"logs.${AWS::Region}.amazonaws.com", "cloudwatch.amazonaws.com", "sns.amazonaws.com"} {
						require.Contains(t, policy, who, "%s: the key policy lets %s use it", id, who)
					}
				}
			}
			requireNagClean(t, notes)
			lint, err := exec.LookPath("cfn-lint")
			require.NoError(t, err, "cfn-lint is needed (pip install cfn-lint)")
			out, err := exec.Command(lint, "--format", "parseable", path).CombinedOutput()
			require.NoError(t, err, "cfn-lint findings:\n%s", out)
		})
	}
}
