package stack_test

import (
	"encoding/json"
	"fmt"
	"maps"
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
	"github.com/sas-go/sas/shared/keyname"
)

// ownKey is a customer's key ARN, as context kms takes it.
const ownKey = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// synthKMS synthesizes the stack with context kms=value (and more
// context, if given) and cdk-nag's checks, and returns the template, its
// annotations and its file.
func synthKMS(t *testing.T, value string, more ...map[string]any) (map[string]any, assertions.Annotations, string) {
	t.Helper()
	assets := standInAssets(t)
	ctx := map[string]any{"prefix": "shop", "assetDir": assets, "kms": value, "alarmEmail": "ops@example.com"}
	for _, m := range more {
		maps.Copy(ctx, m)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &ctx})
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
			// sealData is off by default: each function opens what was
			// sealed under the key (sealData turned off since), makes no data key.
			requireSealUse(t, tmpl, keyArn(t, tmpl, c.kms), false)
			requireQueueKeyUse(t, tmpl, keyArn(t, tmpl, c.kms))
			roles := 0
			for id, p := range of(tmpl, "AWS::IAM::Policy") {
				through, throughS3 := false, false
				publishes := strings.Contains(fmt.Sprint(p["PolicyDocument"]), "sns:Publish")
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
						require.Contains(t, via, "dynamodb.${AWS::Region}.amazonaws.com", id)
						if publishes {
							require.Contains(t, via, "sns.${AWS::Region}.amazonaws.com", "%s publishes alerts", id)
						} else {
							require.NotContains(t, via, "sns.", "%s: it publishes nothing: no key use through SNS", id)
						}
						require.NotContains(t, via, "s3.", id)
						require.NotContains(t, via, "sqs.", "%s: the queues' use is each role's own queues' (requireQueueKeyUse)", id)
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

// With context sealData=true (and kms), every function (Submission, the
// Scheduler, the Supervisor, each Agent: all handle an order's data) is
// told the key that makes the orders' data keys (SAS_DATA_KEY: the key
// created, or the customer's) and that new orders are sealed
// (SAS_SEAL_DATA), and its role may call KMS with that key directly in one
// statement, SealData: Submission make an order's data key and open it,
// the others open it; only on that key, and only for an order's data key
// (an encryption context of orderId and nothing else; none at all
// refused). Every other use of the key stays through a service. The stack
// stays cdk-nag and cfn-lint clean.
func TestSealedDataGivesEachFunctionTheKeyAndOnlyItsUse(t *testing.T) {
	for _, kms := range []string{"create", ownKey} {
		t.Run(strings.SplitN(kms, ":", 2)[0], func(t *testing.T) {
			tmpl, notes, path := synthKMS(t, kms, map[string]any{"sealData": "true"})
			requireSealUse(t, tmpl, keyArn(t, tmpl, kms), true)
			requireQueueKeyUse(t, tmpl, keyArn(t, tmpl, kms))
			requireNagClean(t, notes)
			lint, err := exec.LookPath("cfn-lint")
			require.NoError(t, err, "cfn-lint is needed (pip install cfn-lint)")
			out, err := exec.Command(lint, "--format", "parseable", path).CombinedOutput()
			require.NoError(t, err, "cfn-lint findings:\n%s", out)
		})
	}
}

// keyArn is how a template refers to the key of context kms: the key it
// creates, or the customer's ARN.
func keyArn(t *testing.T, tmpl map[string]any, kms string) any {
	t.Helper()
	if kms != "create" {
		return kms
	}
	keys := of(tmpl, "AWS::KMS::Key")
	require.Len(t, keys, 1)
	for id := range keys {
		return map[string]any{"Fn::GetAtt": []any{id, "Arn"}}
	}
	return nil
}

// requireSealUse asserts what a stack with a key (arn) lets its functions
// do with the orders' sealed data: every function is told the key
// (SAS_DATA_KEY) and whether new orders are sealed (SAS_SEAL_DATA:
// sealing), and its role has one SealData statement, on that key alone and
// only for an order's data key: kms:Decrypt for every function, whether
// sealing or not (an order sealed before sealData was turned off runs to
// its end), and kms:GenerateDataKey for Submission only when sealing. Any
// other use of the key is through a service; a function that does not seal
// new orders may not make a data key at all but through S3 (the payload
// bucket's own encryption), nor write over a sender's body under
// incoming/.
func requireSealUse(t *testing.T, tmpl map[string]any, arn any, sealing bool) {
	t.Helper()
	fns := of(tmpl, "AWS::Lambda::Function")
	require.Len(t, fns, len(expected), "Submission, Scheduler, Supervisor and an Agent per agent")
	for id, f := range fns {
		env := f["Environment"].(map[string]any)["Variables"].(map[string]any)
		require.Equal(t, arn, env["SAS_DATA_KEY"], id)
		require.Equal(t, fmt.Sprint(sealing), env["SAS_SEAL_DATA"], id)
	}
	roles := map[string]bool{}
	for id, p := range of(tmpl, "AWS::IAM::Policy") {
		role := roleOf(id)
		require.NotEmpty(t, role, id)
		var seal []map[string]any
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			if st["Sid"] == "SealData" {
				seal = append(seal, st)
				continue
			}
			if !slices.ContainsFunc(asList(st["Action"]), func(a string) bool { return strings.HasPrefix(a, "kms:") }) {
				continue
			}
			require.Contains(t, fmt.Sprint(st["Condition"]), "kms:ViaService", "%s: %v: any other use of the key only through a service", id, st["Sid"])
		}
		require.Len(t, seal, 1, "%s: one SealData statement", id)
		s3 := slices.Clone(expectedS3[role])
		if role == "Submission" && sealing {
			// It writes a sealed order over the clear body its
			// sender offloaded under incoming/ (offload.Store.Reseal).
			s3 = append(s3, "s3:PutObject on bucket/incoming/*")
			slices.Sort(s3)
		}
		require.Equal(t, s3, s3Grants(p), "%s's S3 grants", role)
		want := []any{"kms:Decrypt"}
		if role == "Submission" && sealing {
			want = []any{"kms:GenerateDataKey", "kms:Decrypt"}
		}
		require.Equal(t, map[string]any{
			"Sid":      "SealData",
			"Effect":   "Allow",
			"Action":   want,
			"Resource": arn,
			"Condition": map[string]any{
				"ForAllValues:StringEquals": map[string]any{"kms:EncryptionContextKeys": []any{"orderId"}},
				"Null":                      map[string]any{"kms:EncryptionContextKeys": "false"},
			},
		}, normalizeActions(seal[0]), id)
		roles[role] = true
	}
	require.Len(t, roles, len(expected), "every function's role")
}

// normalizeActions is a statement with its Action a list, as IAM allows a
// lone action to be written alone.
func normalizeActions(st map[string]any) map[string]any {
	out := maps.Clone(st)
	if a, ok := out["Action"].(string); ok {
		out["Action"] = []any{a}
	}
	return out
}

// Without a key (no context kms, so no sealData) no function is told a data
// key and no role may call KMS directly (with kms alone, every function
// may open what was sealed before: TestYourOwnKeyEncryptsEveryTableQueueTopicAndLogGroup).
func TestNothingSealedWithoutSealData(t *testing.T) { requireNotSealed(t, tmpl) }

// requireNotSealed asserts that no function of a template has SAS_DATA_KEY
// and no role a SealData statement.
func requireNotSealed(t *testing.T, tmpl map[string]any) {
	t.Helper()
	fns := of(tmpl, "AWS::Lambda::Function")
	require.NotEmpty(t, fns)
	for id, f := range fns {
		require.NotContains(t, f["Environment"].(map[string]any)["Variables"], "SAS_DATA_KEY", id)
	}
	for id, p := range of(tmpl, "AWS::IAM::Policy") {
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			require.NotEqual(t, "SealData", s.(map[string]any)["Sid"], id)
		}
	}
}

// sealData needs the key its data keys are made under: without context
// kms, synth stops and says which contexts; a value not true or false is
// refused; sealData=false needs nothing.
func TestSealDataNeedsKMS(t *testing.T) {
	for _, v := range []any{"true", true} {
		_, err := stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"sealData": v}}))
		require.EqualError(t, err, "context sealData=true needs context kms (create, or your key's ARN): each order's data key is made under that key")
	}
	_, err := stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"sealData": "yes", "kms": "create"}}))
	require.ErrorContains(t, err, `context sealData="yes": "yes" is not true or false`)
	p, err := stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"sealData": "true", "kms": ownKey}}))
	require.NoError(t, err)
	require.True(t, p.SealData)
	p, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"sealData": "false"}}))
	require.NoError(t, err)
	require.False(t, p.SealData)
}

// With sealData, an Agent whose calls in flight are bounded per key
// (perKey) names its keys under a secret of its own (keyname.Namer): its role
// alone may make that secret, and no other data key (kms:GenerateDataKey
// for the encryption context of its secret's owner alone); an agent
// without perKey, and every other function, makes none.
func TestAKeyedAgentMayMakeItsOwnSecretOnly(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keyed.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`name: keyed
defaults: {timeout: 10s}
agents:
  payment: {endpoint: "https://pay.example.com", perKey: {key: .order.customerId, inFlight: 2}}
  shipping: {endpoint: "https://ship.example.com"}
steps:
  - name: charge
    agent: payment
  - name: ship
    agent: shipping
`), 0o644))
	for _, sealData := range []string{"true", "false"} {
		tmpl, notes, _ := synthKMS(t, "create", map[string]any{"sealData": sealData, "workflows": file})
		requireNagClean(t, notes)
		arn := keyArn(t, tmpl, "create")
		named := map[string]any{}
		for id, p := range of(tmpl, "AWS::IAM::Policy") {
			for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				if st := s.(map[string]any); st["Sid"] == "KeyNames" {
					require.NotContains(t, named, id, "one KeyNames statement")
					named[id] = normalizeActions(st)
				}
			}
		}
		if sealData == "false" {
			require.Empty(t, named, "no key named without sealData")
			continue
		}
		require.Len(t, named, 1, "the keyed agent's role alone: %v", slices.Collect(maps.Keys(named)))
		for id, st := range named {
			require.True(t, strings.HasPrefix(id, "AgentPaymentRole"), id)
			require.Equal(t, map[string]any{
				"Sid":      "KeyNames",
				"Effect":   "Allow",
				"Action":   []any{"kms:GenerateDataKey"},
				"Resource": arn,
				"Condition": map[string]any{
					"StringEquals":              map[string]any{"kms:EncryptionContext:orderId": keyname.SecretOwner("payment")},
					"ForAllValues:StringEquals": map[string]any{"kms:EncryptionContextKeys": []any{"orderId"}},
				},
			}, st)
		}
	}
}
