package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// globals are the flags every operator command takes.
type globals struct {
	endpoint string
	prefix   string
	output   string
	pickup   time.Duration
	agents   string
}

// newFlags returns a command's flag set with the common flags on it.
func newFlags(name string, stderr io.Writer, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet("sasctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	prefix := os.Getenv("SAS_PREFIX")
	if prefix == "" {
		prefix = "sas-demo"
	}
	fs.StringVar(&g.endpoint, "endpoint", "", "AWS endpoint (an emulator); default: the SDK's own settings, such as AWS_ENDPOINT_URL")
	fs.StringVar(&g.prefix, "prefix", prefix, "the deployment's resource prefix ($SAS_PREFIX)")
	fs.StringVar(&g.output, "output", "text", "text or json")
	fs.DurationVar(&g.pickup, "pickup-timeout", workflow.DefaultPickupTimeout, "a resubmitted step's pickup deadline, for an order stored without its workflow's")
	agents := os.Getenv("SAS_AGENTS")
	if agents == "" {
		agents = strings.Join(workflow.MustExample(workflow.OrderWorkflow).Agents(), ",")
	}
	fs.StringVar(&g.agents, "agents", agents, "the deployment's agents, comma-separated ($SAS_AGENTS; default the order workflow's)")
	return fs
}

// parse parses the flags and checks the common ones; it returns an exit code
// (>= 0) when the command must stop.
func parse(fs *flag.FlagSet, args []string, g *globals, stderr io.Writer) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if g.output != "text" && g.output != "json" {
		fmt.Fprintf(stderr, "%s: --output must be text or json, not %q\n", fs.Name(), g.output)
		return 2
	}
	return -1
}

// connect builds the operator for the deployment the flags name.
func connect(ctx context.Context, g *globals) (*operator.Operator, error) {
	emulated := g.endpoint != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: g.endpoint, Emulated: emulated})
	if err != nil {
		return nil, err
	}
	op := operator.New(c, topology.Default(g.prefix, strings.Split(g.agents, ",")...))
	op.PickupTimeout = g.pickup
	return op, nil
}

// fail prints err as one line and returns the exit code 1.
func fail(stderr io.Writer, cmd string, g *globals, err error) int {
	var noQueue *sqstypes.QueueDoesNotExist
	var noTable *types.ResourceNotFoundException
	if errors.As(err, &noQueue) || errors.As(err, &noTable) || strings.Contains(err.Error(), "NonExistentQueue") {
		err = fmt.Errorf("no deployment %q at this endpoint (check --prefix and --endpoint, or start one with make run): %w", g.prefix, err)
	}
	fmt.Fprintf(stderr, "sasctl %s: %s\n", cmd, strings.ReplaceAll(err.Error(), "\n", " "))
	return 1
}

// emit writes v as JSON, or calls text.
func emit(out io.Writer, g *globals, v any, text func()) {
	if g.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	text()
}

// one requires exactly one positional argument.
func one(fs *flag.FlagSet, what string, stderr io.Writer) (string, bool) {
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "%s: need exactly one %s\n", fs.Name(), what)
		return "", false
	}
	return fs.Arg(0), true
}

// localEndpoint is the emulator a local command runs against: the one
// AWS_ENDPOINT_URL names, or a moto_server it starts (logs in runDir); stop
// stops what it started. It says which on out.
func localEndpoint(ctx context.Context, runDir string, out io.Writer) (endpoint string, stop func(), err error) {
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		fmt.Fprintf(out, "using the emulator at AWS_ENDPOINT_URL=%s\n", e)
		return e, func() {}, nil
	}
	moto, err := emulator.StartMoto(ctx, runDir)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(out, "moto_server started on %s (pid %d, log %s)\n", moto.Endpoint, moto.PID(), moto.LogPath)
	return moto.Endpoint, func() { _ = moto.Stop() }, nil
}

// localDynamoDB starts DynamoDB Local for the state store (installed into
// cacheDir on first use), unless AWS_ENDPOINT_URL names an emulator that
// serves everything: then endpoint is "". moto reports a flat unit per
// DynamoDB request and serves one request at a time; DynamoDB Local, AWS's
// own engine, reports capacity and serves many.
func localDynamoDB(ctx context.Context, cacheDir, runDir string, out io.Writer) (endpoint string, stop func(), err error) {
	if os.Getenv("AWS_ENDPOINT_URL") != "" {
		return "", func() {}, nil
	}
	ddb, err := emulator.StartDynamoDBLocal(ctx, cacheDir, runDir)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(out, "DynamoDB Local started on %s (pid %d, log %s)\n", ddb.Endpoint, ddb.PID(), ddb.LogPath)
	return ddb.Endpoint, func() { _ = ddb.Stop() }, nil
}
