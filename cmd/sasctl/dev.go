package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sas-go/sas/shared/console"
	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// devFlags are sasctl dev's flags.
type devFlags struct {
	prefix, runDir, cacheDir, listen string
	motoPort, dynamodbPort           int
	seed                             uint64
	faults                           faultFlags
	settings                         workflow.Settings
	supervisorEvery                  time.Duration
	workflows                        listFlag
}

// The fixed ports of sasctl dev's emulators and console by default: the
// lines a user pasted stay right across restarts.
const (
	devMotoPort     = 4566 // LocalStack's edge port: clients configured for one find the other
	devDynamoDBPort = 8000 // DynamoDB Local's own default
	devConsole      = "127.0.0.1:8090"
)

// parseDev reads sasctl dev's flags.
func parseDev(args []string, stderr io.Writer) (devFlags, error) {
	f := devFlags{prefix: os.Getenv("SAS_PREFIX")}
	if f.prefix == "" {
		f.prefix = "sas-dev"
	}
	fs := flag.NewFlagSet("sasctl dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q (sasctl dev faults … changes the faults of a running one)", fs.Arg(0))
	}
	return f, f.check()
}

// check says what is wrong with the flags, before anything starts.
func (f devFlags) check() error {
	if f.supervisorEvery <= 0 {
		return errors.New("--supervisor-every must be positive")
	}
	for name, p := range map[string]int{"--moto-port": f.motoPort, "--dynamodb-port": f.dynamodbPort} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("%s %d is not a port (0 for a free one)", name, p)
		}
	}
	if err := console.CheckAddr(f.listen); err != nil {
		return err
	}
	return f.faults.change.Validate()
}

// register puts the flags on fs.
func (f *devFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.prefix, "prefix", f.prefix, "the resources' name prefix ($SAS_PREFIX, default sas-dev)")
	fs.StringVar(&f.runDir, "run-dir", ".run", "where the tables (DynamoDB Local's file), logs and dev.json go")
	fs.StringVar(&f.cacheDir, "cache-dir", ".cache", "where DynamoDB Local is installed on first use")
	fs.StringVar(&f.listen, "listen", devConsole, "the console's address (127.0.0.1 only; PORT 0 for a free one)")
	fs.IntVar(&f.motoPort, "moto-port", devMotoPort, "moto_server's port on 127.0.0.1 (0 for a free one)")
	fs.IntVar(&f.dynamodbPort, "dynamodb-port", devDynamoDBPort, "DynamoDB Local's port on 127.0.0.1 (0 for a free one)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the simulator's random faults")
	f.faults.register(fs)
	fs.DurationVar(&f.settings.StepTimeout, "step-timeout", 0, "override every step's timeout (0: the workflow's)")
	fs.DurationVar(&f.settings.PickupTimeout, "pickup-timeout", 0, "override the pickup timeout (0: the workflow's)")
	fs.DurationVar(&f.supervisorEvery, "supervisor-every", time.Second, "the Supervisor's schedule")
	fs.Var(&f.workflows, "workflows", "workflow files to run, comma-separated or repeated (default: the example order workflow)")
}

func dev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "faults" {
		return devFaults(ctx, args[1:], stdout, stderr)
	}
	f, err := parseDev(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "sasctl dev:", err)
		return 2
	}
	if err := runDev(ctx, f, stdout); err != nil {
		fmt.Fprintln(stderr, "sasctl dev:", err)
		if errors.Is(err, emulator.ErrMotoMissing) {
			return 2
		}
		return 1
	}
	return 0
}

// runDev runs the local deployment until ctx ends (SIGINT, SIGTERM), then
// stops everything it started, in reverse order.
func runDev(ctx context.Context, f devFlags, out io.Writer) error {
	d := &devRun{flags: f, out: out}
	defer d.stop()
	if err := d.start(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready; Ctrl-C stops it")
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}

// newSim is the remote simulator of a dev run, with the faults the flags set.
func newSim(f devFlags) (*remotesim.Simulator, error) {
	sim := remotesim.New(f.seed)
	_, err := sim.Apply(f.faults.change, time.Now())
	return sim, err
}
