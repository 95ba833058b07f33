package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/console"
	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// devRun is a running `sasctl dev`: what it started, to stop in reverse.
type devRun struct {
	flags devFlags
	out   io.Writer
	stops []func()
	state devState
	sim   *remotesim.Simulator
	stack *localrun.Stack
}

// stop stops what start started, last first, and says so.
func (d *devRun) stop() {
	for i := len(d.stops) - 1; i >= 0; i-- {
		d.stops[i]()
	}
	d.stops = nil
}

// later registers a stop.
func (d *devRun) later(f func()) { d.stops = append(d.stops, f) }

// start starts the emulators (unless AWS_ENDPOINT_URL names one), the remote
// simulator, the local stack and its runner, the console and the control
// endpoint, and prints what a user pastes to talk to it.
func (d *devRun) start(ctx context.Context) error {
	f := d.flags
	o, err := localOptions(f.settingFlags)
	if err != nil {
		return err
	}
	o.DeadlineShards = f.Topology.DeadlineShards // sasctl's operator reads every shard of the default
	if err := d.claimRunDir(); err != nil {
		return err
	}
	if err := d.tracing(ctx); err != nil { // before the clients: they are traced if it is on
		return err
	}
	if err := d.emulators(ctx, &o); err != nil {
		return err
	}
	if err := d.queues(&o); err != nil {
		return err
	}
	if err := d.simulator(&o); err != nil {
		return err
	}
	if err := d.deploy(ctx, o); err != nil {
		return err
	}
	if err := d.serve(); err != nil {
		return err
	}
	d.printEnv()
	return nil
}

// emulators starts moto_server and DynamoDB Local (its tables kept in the
// run folder), or uses the emulator AWS_ENDPOINT_URL names.
func (d *devRun) emulators(ctx context.Context, o *localrun.Options) error {
	f := d.flags
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		if err := answers(ctx, e); err != nil {
			return fmt.Errorf("nothing answers at AWS_ENDPOINT_URL=%s (%w): start that emulator, or unset AWS_ENDPOINT_URL "+
				"(and AWS_ENDPOINT_URL_DYNAMODB) to let sasctl dev start its own", e, err)
		}
		d.state.Endpoint, d.state.DynamoDBEndpoint = e, os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
		fmt.Fprintf(d.out, "using the emulator at AWS_ENDPOINT_URL=%s (what survives a restart is up to it)\n", e)
		return nil
	}
	moto, err := emulator.StartMotoOn(ctx, f.runDir, f.motoPort)
	if err != nil {
		return err
	}
	d.process(moto)
	fmt.Fprintf(d.out, "moto_server started on %s (pid %d, log %s)\n", moto.Endpoint, moto.PID(), moto.LogPath)
	dbDir := filepath.Join(f.runDir, "dynamodb")
	fmt.Fprintln(d.out, "starting DynamoDB Local (installed into", f.cacheDir, "on first use)")
	ddb, err := emulator.StartDynamoDBLocalPersistent(ctx, f.cacheDir, f.runDir, dbDir, f.dynamodbPort)
	if err != nil {
		return err
	}
	d.process(ddb)
	fmt.Fprintf(d.out, "DynamoDB Local started on %s (pid %d, tables in %s, log %s)\n", ddb.Endpoint, ddb.PID(),
		filepath.Join(dbDir, emulator.DynamoDBLocalFile), ddb.LogPath)
	d.state.Endpoint, d.state.DynamoDBEndpoint = moto.Endpoint, ddb.Endpoint
	o.Endpoint, o.DynamoDBEndpoint = moto.Endpoint, ddb.Endpoint
	return nil
}

// queues starts the in-process queues if --queues asks for them.
func (d *devRun) queues(o *localrun.Options) error {
	endpoint, stop, err := localQueues(d.flags.queues, d.flags.queuesPort, rand.Uint64(), d.out)
	if err != nil {
		return err
	}
	if endpoint != "" {
		d.later(func() { stop(); fmt.Fprintln(d.out, "stopped the in-process queues") })
	}
	d.state.QueuesEndpoint, o.QueuesEndpoint = endpoint, endpoint
	return nil
}

// answers checks that an HTTP server answers at url, whatever it says.
func answers(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// process records a started emulator, to stop by its PID.
func (d *devRun) process(p *emulator.Process) {
	if d.state.Processes == nil {
		d.state.Processes = map[string]int{}
	}
	d.state.Processes[p.Name] = p.PID()
	d.later(func() {
		_ = p.Stop()
		fmt.Fprintf(d.out, "stopped %s (pid %d)\n", p.Name, p.PID())
	})
}

// simulator starts, on loopback, the remote simulator for the agents whose
// endpoint names it (${SAS_REMOTE_BASE_URL}), and the fault proxy in front
// of each other HTTP agent's own service, both taking the faults sasctl dev
// faults and the console change. Neither starts if no agent calls over
// HTTP (every agent custom, in Go).
func (d *devRun) simulator(o *localrun.Options) error {
	sim, err := newSim(d.flags)
	if err != nil {
		return err
	}
	d.sim = sim
	set := o.Workflows
	if set.IsZero() {
		set = localrun.DefaultWorkflows()
	}
	simulated, own, unproxied := agentsByEndpoint(set.With(o.Settings), o.Vars)
	if len(simulated) == 0 && len(own) == 0 {
		fmt.Fprintln(d.out, "no agent calls a service over HTTP: no remote simulator, no fault proxy")
		return nil
	}
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	d.later(func() { _ = srv.Close(); fmt.Fprintln(d.out, "stopped the remote simulator") })
	if len(simulated) > 0 {
		o.RemoteURL = srv.URL
		fmt.Fprintf(d.out, "remote simulator on %s for %s (faults: %s; change them with sasctl dev faults, or in the console)\n",
			srv.URL, strings.Join(simulated, ", "), sim.AllFaults()[""].Describe(time.Now()))
	}
	for _, a := range slices.Sorted(maps.Keys(own)) {
		path, err := sim.Proxy(a, own[a])
		if err != nil {
			return err
		}
		if o.Endpoints == nil {
			o.Endpoints = map[string]string{}
		}
		o.Endpoints[a] = srv.URL + path
		fmt.Fprintf(d.out, "fault proxy for agent %s: %s%s -> %s (sasctl dev faults --service %s changes its faults)\n",
			a, srv.URL, path, own[a], a)
	}
	for _, a := range unproxied {
		fmt.Fprintf(d.out, "agent %s signs its calls (sigv4): called directly, with no fault proxy\n", a)
	}
	return nil
}

// agentsByEndpoint sorts the HTTP agents of set: those whose endpoint names
// the simulator (${SAS_REMOTE_BASE_URL}), those of a service of their own
// (their endpoint, resolved), and those signed with SigV4 (a proxy would
// break their signature).
func agentsByEndpoint(set workflow.Set, vars map[string]string) (simulated []string, own map[string]string, unproxied []string) {
	const marker = "http://sas-remote-simulator.invalid"
	own = map[string]string{}
	resolve := func(name string) string {
		if v, ok := vars[name]; ok {
			return v
		}
		if name == deployment.EnvRemoteBaseURL {
			return marker
		}
		return os.Getenv(name)
	}
	for _, a := range set.Agents() {
		spec, err := set.ResolveAgent(a, resolve)
		switch {
		case err != nil || spec.Custom:
			// a custom agent calls no endpoint; an unresolved one fails at its Agent's start
		case strings.HasPrefix(spec.Endpoint, marker):
			simulated = append(simulated, a)
		case spec.Auth != nil && spec.Auth.SigV4 != nil:
			unproxied = append(unproxied, a)
		default:
			own[a] = spec.Endpoint
		}
	}
	return simulated, own, unproxied
}

// deploy provisions the topology (a restart finds its tables again) and
// starts the local runner, the Supervisor's ticker included.
func (d *devRun) deploy(ctx context.Context, o localrun.Options) error {
	logPath := filepath.Join(d.flags.runDir, "handlers.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("handler log: %w", err)
	}
	d.later(func() { _ = logf.Close() })
	o.Log, o.Metrics = slog.New(slog.NewJSONHandler(logf, nil)), logf
	if d.stack, err = localrun.New(ctx, o); err != nil {
		return err
	}
	// An async step's simulated service answers through the events queue, as a real one would.
	d.sim.OnCallback(d.stack.Callbacks(func(err error) { fmt.Fprintln(logf, err) }))
	if err := d.sayResources(ctx, logPath); err != nil {
		return err
	}
	r, err := d.stack.Runner(ctx) // a handler that cannot be built stops sasctl dev here
	if err != nil {
		return fmt.Errorf("local runner: %w", err)
	}
	d.background("the local runner", func(ctx context.Context) error {
		if err := r.Run(ctx); !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	})
	return nil
}

// sayResources says what was provisioned, and whether the tables held the
// orders of an earlier run.
func (d *devRun) sayResources(ctx context.Context, logPath string) error {
	kept, _, err := d.stack.Store.SearchTasks(ctx, statestore.TaskFilter{}, 1, "")
	if err != nil {
		return fmt.Errorf("read the state table: %w", err)
	}
	tables := "new"
	if len(kept) > 0 {
		tables = "found again, with the orders of an earlier run"
	}
	where := "moto keeps them in memory: a restart recreates them empty"
	switch {
	case d.state.QueuesEndpoint != "":
		where = "served in process, in memory: a restart recreates them empty"
	case len(d.state.Processes) == 0:
		where = "kept by the emulator at AWS_ENDPOINT_URL"
	}
	t := d.stack.Topology()
	fmt.Fprintf(d.out, "resources ready: tables %s, %s (%s); %d queues with DLQs and topic %s (%s); handler logs in %s\n",
		t.OrdersTable(), t.StateTable(), tables, len(t.Queues()), t.AlertTopic(), where, logPath)
	return nil
}

// serve starts the console and the control endpoint, and writes dev.json.
func (d *devRun) serve() error {
	op := operator.New(d.stack.Deployment.Clients, d.stack.Topology()).WithRetention(d.stack.Deployment.Config.Retention())
	op.WithMetrics(d.stack.Deployment.Metrics)         // the ends the console makes, with the handlers' EMF in handlers.log
	op.Workflows = d.stack.Deployment.Config.Workflows // the order page offers a move to the version it runs
	if p := d.flags.Overrides.PickupTimeout; p > 0 {
		op.PickupTimeout = p
	}
	c, err := console.New(console.Config{Operator: op, Faults: d.sim, Who: operatorName() + " in the console"})
	if err != nil {
		return err
	}
	l, err := console.Listen(d.flags.listen)
	if err != nil {
		return err
	}
	d.state.Console = console.URL(l)
	d.background("the console", func(ctx context.Context) error { return c.Serve(ctx, l) })
	return d.control()
}

// background runs serve until stop, which waits for it.
func (d *devRun) background(name string, serve func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	d.later(func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(d.out, "%s: %v\n", name, err)
		}
		fmt.Fprintln(d.out, "stopped", name)
	})
}
