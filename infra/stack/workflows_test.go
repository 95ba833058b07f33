package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/infra/stack"
)

// fulfilmentVars are what the fulfilment workflow's agents need set at synth.
var fulfilmentVars = map[string]string{
	"WAREHOUSE_URL": "https://warehouse.example.com/api", "WAREHOUSE_SECRET": "shop/warehouse-key",
	"BILLING_URL": "https://billing.example.com", "BILLING_TOKEN_PARAMETER": "/shop/billing/token",
	"COURIER_URL":     "https://abc123.execute-api.eu-west-1.amazonaws.com/prod",
	"COURIER_API_ARN": "arn:aws:execute-api:eu-west-1:111111111111:abc123/prod/POST/*",
}

// synthWorkflows synthesizes the stack for workflow files, as
// `cdk synth -c workflows=...` does, and returns the template.
func synthWorkflows(t *testing.T, files ...string) (map[string]any, assertions.Annotations) {
	t.Helper()
	root, _ := filepath.Abs("../..")
	for k, v := range fulfilmentVars {
		t.Setenv(k, v)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(root, "shared", "workflow", "examples", f))
	}
	assets := standInAssets(t)
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{
		"prefix": "shop", "workflows": strings.Join(paths, ","), "assetDir": assets,
	}})
	p, err := stack.Config(app)
	require.NoError(t, err)
	st := stack.New(app, "shop-fulfilment", p, nil)
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(nil), nil)
	var out map[string]any
	b, _ := json.Marshal(assertions.Template_FromStack(st, nil).ToJSON())
	require.NoError(t, json.Unmarshal(b, &out))
	return out, assertions.Annotations_FromStack(st)
}

// of returns a template's resources of a type, by logical id.
func of(tmpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tmpl["Resources"].(map[string]any) {
		if res := r.(map[string]any); res["Type"] == typ {
			props, _ := res["Properties"].(map[string]any)
			out[id] = props
		}
	}
	return out
}

func TestAWorkflowFileDeploysAnAgentFunctionPerAgent(t *testing.T) {
	tmpl, notes := synthWorkflows(t, "fulfilment.yaml", "order.yaml")
	agents := []string{"Warehouse", "Billing", "Loyalty", "Courier", "Inventory", "Payment", "Shipping"}
	fns := of(tmpl, "AWS::Lambda::Function")
	require.Len(t, fns, 3+len(agents), "submission, scheduler, supervisor and one agent per agent the files declare")
	require.Len(t, of(tmpl, "AWS::Lambda::EventSourceMapping"), 3+2*len(agents), "orders, events, scheduler, and each agent's request and response queues")
	require.Len(t, of(tmpl, "AWS::SQS::Queue"), 2*(3+2*len(agents))+1, "each with its DLQ, and the alert inbox")
	require.Len(t, of(tmpl, "AWS::CloudWatch::Alarm"), 5+2*(3+2*len(agents))+2, "five of the pipeline; per queue: DLQ not empty, oldest message; per workflow: its failure rate")
	layers := of(tmpl, "AWS::Lambda::LayerVersion")
	require.Len(t, layers, 1, "the workflow files, in a layer")

	code := map[string]string{}
	for id, f := range fns {
		env := f["Environment"].(map[string]any)["Variables"].(map[string]any)
		require.Equal(t, "/opt/workflows/fulfilment.yaml,/opt/workflows/order.yaml", env["SAS_WORKFLOWS"], id)
		require.Equal(t, "warehouse,billing,loyalty,courier,inventory,payment,shipping", env["SAS_AGENTS"], id)
		require.Len(t, f["Layers"], 1, id)
		b, _ := json.Marshal(f["Code"])
		code[id] = string(b)
		switch {
		case strings.HasPrefix(id, "AgentWarehouse"):
			require.Equal(t, "https://warehouse.example.com/api", env["WAREHOUSE_URL"])
			require.Equal(t, "shop/warehouse-key", env["WAREHOUSE_SECRET"], "the secret's name; its value stays in Secrets Manager")
			require.Nil(t, env["BILLING_URL"], "an agent has its own variables only")
		case strings.HasPrefix(id, "AgentCourier"):
			require.Equal(t, fulfilmentVars["COURIER_URL"], env["COURIER_URL"])
			require.Nil(t, env["AWS_REGION"], "Lambda sets it")
		case strings.HasPrefix(id, "AgentInventory"):
			require.Equal(t, "https://remote.example.invalid", env["SAS_REMOTE_BASE_URL"], "the order workflow's endpoints: context remoteBaseUrl, or this")
			require.Nil(t, env["WAREHOUSE_URL"])
		}
	}
	agentCode := func(name string) string {
		for id, c := range code {
			if strings.HasPrefix(id, "Agent"+name) {
				return c
			}
		}
		return ""
	}
	require.Equal(t, agentCode("Warehouse"), agentCode("Courier"), "the HTTP agents share one asset")
	require.NotEqual(t, agentCode("Warehouse"), agentCode("Loyalty"), "the Go agent is its own build (build/loyalty)")

	grants := map[string][]string{} // role → credential actions on resources
	for id, p := range of(tmpl, "AWS::IAM::Policy") {
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			for _, a := range asList(st["Action"]) {
				if strings.HasPrefix(a, "secretsmanager:") || strings.HasPrefix(a, "ssm:") || strings.HasPrefix(a, "execute-api:") {
					grants[strings.SplitN(id, "Role", 2)[0]] = append(grants[strings.SplitN(id, "Role", 2)[0]],
						a+" "+fmt.Sprint(st["Resource"]))
				}
			}
		}
	}
	require.Len(t, grants, 3, "only the agents with credentials may read any: %v", grants)
	require.Len(t, grants["AgentWarehouse"], 1)
	require.Contains(t, grants["AgentWarehouse"][0], "secretsmanager:GetSecretValue")
	require.Contains(t, grants["AgentWarehouse"][0], ":secret:shop/warehouse-key-??????")
	require.Contains(t, grants["AgentBilling"][0], "ssm:GetParameter")
	require.Contains(t, grants["AgentBilling"][0], ":parameter/shop/billing/token")
	require.Equal(t, []string{"execute-api:Invoke " + fulfilmentVars["COURIER_API_ARN"]}, grants["AgentCourier"])

	requireNagClean(t, notes)
	path := filepath.Join(t.TempDir(), "template.json")
	b, _ := json.Marshal(tmpl)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	lint, err := exec.LookPath("cfn-lint")
	require.NoError(t, err, "cfn-lint is needed (pip install cfn-lint)")
	out, err := exec.Command(lint, "--format", "parseable", path).CombinedOutput()
	require.NoError(t, err, "cfn-lint findings:\n%s", out)
}

func TestConfigRefusesBadWorkflowFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: bad\nagents:\n  a: {endpoint: '${NOT_SET_ANYWHERE}/x'}\nsteps:\n  - {name: s, agent: a, timeout: 1m}\n"), 0o600))
	_, err := stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"workflows": bad}}))
	require.EqualError(t, err, "context workflows:\n"+bad+`:5: steps[0].timeout: step "s"'s timeout 1m0s is longer than its agent function allows (25s: its timeout less the time to reply)`)

	require.NoError(t, os.WriteFile(bad, []byte("name: bad\nagents:\n  a: {endpoint: '${NOT_SET_ANYWHERE}/x'}\nsteps:\n  - {name: s, agent: a, timeout: 5s}\n"), 0o600))
	_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"workflows": bad}}))
	require.ErrorContains(t, err, bad+":3: agents.a.endpoint: ${NOT_SET_ANYWHERE} is not set")

	twin := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(twin, []byte("name: twin\nagents:\n  b: {endpoint: 'http://b'}\nsteps:\n  - {name: s, agent: b, timeout: 5s}\n"), 0o600))
	t.Setenv("NOT_SET_ANYWHERE", "http://a")
	_, err = stack.Config(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"workflows": bad + "," + twin}}))
	require.ErrorContains(t, err, "have the same file name")
}
