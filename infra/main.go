// Command infra is the CDK app: `CDK_OUTDIR=cdk.out go run ./infra` (or make
// synth) writes the CloudFormation template of the stack. Configuration comes
// from CDK context: see infra/stack.Config and the README's Deploy section.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sas-go/sas/infra/stack"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	props, err := stack.Config(app)
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(2)
	}
	sp := &awscdk.StackProps{}
	if acct, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION"); acct != "" && region != "" {
		sp.Env = &awscdk.Environment{Account: jsii.String(acct), Region: jsii.String(region)}
	}
	stack.New(app, props.Topology.Prefix+"-pipeline", props, sp)
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
}
