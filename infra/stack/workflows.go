package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/shared/workflow"
)

// layerRoot is where Lambda mounts a layer's files.
const layerRoot = "/opt"

// workflowLayer is a layer holding the workflow files, and their paths in
// a function; none (nil) when the stack runs the built-in example. The
// files are copied under the asset folder (AssetDir/workflows), which the
// layer's asset is made from.
func workflowLayer(st awscdk.Stack, p Props) (awslambda.ILayerVersion, []string) {
	if len(p.WorkflowFiles) == 0 {
		return nil, nil
	}
	dir := filepath.Join(p.AssetDir, "workflows-layer")
	if err := os.RemoveAll(dir); err != nil {
		panic(fmt.Errorf("workflow layer: %w", err))
	}
	if err := os.MkdirAll(filepath.Join(dir, "workflows"), 0o755); err != nil {
		panic(fmt.Errorf("workflow layer: %w", err))
	}
	var paths []string
	for _, f := range p.WorkflowFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			panic(fmt.Errorf("workflow layer: %w", err)) // Config read it a moment ago
		}
		name := filepath.Base(f)
		if err := os.WriteFile(filepath.Join(dir, "workflows", name), b, 0o644); err != nil {
			panic(fmt.Errorf("workflow layer: %w", err))
		}
		paths = append(paths, layerRoot+"/workflows/"+name)
	}
	for _, d := range p.Workflows.Definitions() { // a schema file goes beside its workflow file, as written
		if d.SchemaFile == "" || d.File == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(d.File), d.SchemaFile))
		if err != nil {
			panic(fmt.Errorf("workflow layer: %w", err)) // Config read it a moment ago
		}
		if err := os.WriteFile(filepath.Join(dir, "workflows", d.SchemaFile), b, 0o644); err != nil {
			panic(fmt.Errorf("workflow layer: %w", err))
		}
	}
	layer := awslambda.NewLayerVersion(st, jsii.String("Workflows"), &awslambda.LayerVersionProps{
		Code:                    awslambda.Code_FromAsset(jsii.String(dir), nil),
		CompatibleRuntimes:      &[]awslambda.Runtime{awslambda.Runtime_PROVIDED_AL2023()},
		CompatibleArchitectures: &[]awslambda.Architecture{awslambda.Architecture_ARM_64()},
		Description:             jsii.String("Scheduler-Agent-Supervisor: the workflow files " + strings.Join(p.Workflows.Names(), ", ")),
	})
	return layer, paths
}

// credentialStatement lets an agent read its own credential, or invoke its
// own IAM-authorised endpoint: nothing else's (nil for an agent without).
func credentialStatement(a workflow.Agent) awsiam.PolicyStatement {
	switch {
	case a.Auth == nil:
		return nil
	case a.Auth.Secret != "":
		arn := a.Auth.Secret
		if !strings.HasPrefix(arn, "arn:") { // a name: Secrets Manager adds six characters to its ARN
			arn = "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:" + arn + "-??????"
		}
		return statement([]string{"secretsmanager:GetSecretValue"}, []*string{awscdk.Fn_Sub(jsii.String(arn), nil)})
	case a.Auth.Parameter != "":
		arn := a.Auth.Parameter
		if !strings.HasPrefix(arn, "arn:") {
			arn = "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/" + strings.TrimPrefix(arn, "/")
		}
		return statement([]string{"ssm:GetParameter"}, []*string{awscdk.Fn_Sub(jsii.String(arn), nil)})
	default:
		return statement([]string{sigV4Actions[a.Auth.SigV4.Service]}, []*string{jsii.String(a.Auth.SigV4.Resource)})
	}
}

// sigV4Actions are the IAM actions that invoke an endpoint signed for a
// service.
var sigV4Actions = map[string]string{"execute-api": "execute-api:Invoke", "lambda": "lambda:InvokeFunctionUrl"}

// checkSigV4 says what keeps a SigV4 agent from its IAM statement, if anything.
func checkSigV4(a workflow.Agent) error {
	if a.Auth == nil || a.Auth.SigV4 == nil {
		return nil
	}
	if sigV4Actions[a.Auth.SigV4.Service] == "" {
		return fmt.Errorf("agent %s: sigv4 service %q: the stack can grant execute-api or lambda", a.Name, a.Auth.SigV4.Service)
	}
	if !strings.HasPrefix(a.Auth.SigV4.Resource, "arn:") {
		return fmt.Errorf("agent %s: sigv4 needs resource, the ARN its role may invoke (arn:aws:execute-api:REGION:ACCOUNT:API/STAGE/POST/*)", a.Name)
	}
	return nil
}
