package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

var motoEndpoint string

func TestMain(m *testing.M) {
	// The local commands install DynamoDB Local where the other suites do,
	// not into the user's cache directory.
	if os.Getenv("SAS_CACHE_DIR") == "" {
		os.Setenv("SAS_CACHE_DIR", emulatortest.CacheDir())
	}
	os.Exit(emulatortest.MainWithMoto(m, &motoEndpoint))
}

var seq atomic.Int64

// pipeline is a running local pipeline the CLI is pointed at: it runs the
// order workflow (the default) and the approval workflow.
type pipeline struct {
	t      *testing.T
	prefix string
	stack  *localrun.Stack
	sim    *remotesim.Simulator
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	return newPipelineOf(t, workflow.MustSet(workflow.MustExample(workflow.OrderWorkflow), workflow.MustExample("approval")),
		// A step timeout of 8 s: a call on a loaded CI machine (moto, -race, two
		// packages at once) can take over 3 s, and a timed-out attempt that is
		// retried changes what these tests expect (a retried refusal is undone).
		workflow.Settings{StepTimeout: 8 * time.Second, MaxFailures: 3, PickupTimeout: 2 * time.Second})
}

// newPipelineOf is a pipeline that runs the workflows, with the settings'
// overrides.
func newPipelineOf(t *testing.T, set workflow.Set, s workflow.Settings) *pipeline {
	t.Helper()
	sim := remotesim.New(3)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	prefix := fmt.Sprintf("cli%d-%d", time.Now().UnixNano()%1e6, seq.Add(1))
	logs := &emulatortest.Logs{}
	// As many deadline shards as sasctl reads by default, as sasctl dev does:
	// an index entry sasctl writes (a cancel's) lands in a shard the
	// pipeline's Supervisor sweeps.
	stack, err := localrun.New(context.Background(), localrun.Options{Endpoint: motoEndpoint, Prefix: prefix,
		DeadlineShards: topology.Default(prefix).DeadlineShards,
		Workflows:      set, Settings: s, RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second, SupervisorEvery: 200 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the pipeline's logs, last lines:\n%s", logs.Tail(40_000))
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = stack.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &pipeline{t: t, prefix: prefix, stack: stack, sim: sim}
}

// ctl runs sasctl against the pipeline: cmd, the deployment's flags, then
// the rest (flags and arguments in any order).
func (p *pipeline) ctl(stdin string, cmd string, rest ...string) (code int, stdout, stderr string) {
	args := append(strings.Fields(cmd), append([]string{"--endpoint", motoEndpoint, "--prefix", p.prefix}, rest...)...)
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// json runs sasctl with --output json, requires it to succeed, checks its
// output against the published schema's definition def, and decodes it.
func (p *pipeline) json(def string, v any, cmd string, rest ...string) {
	p.t.Helper()
	code, out, errs := p.ctl("", cmd, append(rest, "--output", "json")...)
	require.Zero(p.t, code, errs)
	requireShape(p.t, def, out)
	require.NoError(p.t, json.Unmarshal([]byte(out), v))
}

// requireShape requires out to be JSON of operator.OutputSchema's
// definition def.
func requireShape(t *testing.T, def, out string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(operator.OutputSchema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("output.schema.json", doc))
	s, err := c.Compile("output.schema.json#/$defs/" + def)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	require.NoError(t, err, out)
	require.NoError(t, s.Validate(inst), "sasctl's %s JSON against the schema:\n%s", def, out)
}

func (p *pipeline) waitEnded(ids ...string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := p.stack.WaitEnded(ctx, ids, 100*time.Millisecond, nil)
	require.NoError(p.t, err)
}

// waitState waits until the order's task is in state.
func (p *pipeline) waitState(id string, state workflow.State) {
	p.t.Helper()
	ok := assert.Eventually(p.t, func() bool {
		task, _, err := p.stack.Store.Load(context.Background(), id)
		return err == nil && task.State == state
	}, 60*time.Second, 100*time.Millisecond, "%s never %s", id, state)
	if !ok {
		_, out, errs := p.ctl("", "status", id)
		p.t.Fatalf("%s never %s; where it stands:\n%s%s", id, state, out, errs)
	}
}

// keys are the idempotency keys of the order's effects, oldest first.
func (p *pipeline) keys(id string) []string {
	var keys []string
	for _, e := range p.sim.Ledger() {
		if e.OrderID == id {
			keys = append(keys, e.Key)
		}
	}
	return keys
}

func orderJSON(id string) string { return localrun.DemoOrder(id, 1).JSON() }

func TestSubmitFromAFileStdinAndGenerate(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	file := filepath.Join(t.TempDir(), "orders.jsonl")
	bad := `{"orderId":"o bad","items":[]}`
	require.NoError(t, os.WriteFile(file, []byte(orderJSON("o-f1")+"\n"+bad+"\n\n"+orderJSON("o-f2")+"\n"), 0o644))
	code, out, errs := p.ctl("", "submit", file)
	require.Equal(t, 1, code, "an order was not sent")
	require.Equal(t, "sent 2 orders to "+p.prefix+"-orders\n", out)
	require.Equal(t, "sasctl submit: order 2 not sent: orderId \"o bad\" must be 1-64 letters, digits or _.:- starting with a letter or digit\n"+
		submitHint+"\n", errs, "the orders not sent, then where to look for the others' verdicts")

	var res operator.Submitted
	code, out, _ = p.ctl("["+orderJSON("o-s1")+"]", "submit", "-", "--output", "json")
	require.Zero(t, code)
	requireShape(t, "submit", out)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 1, res.Sent)
	require.Empty(t, res.Rejected)

	code, out, _ = p.ctl("", "submit", "--generate", "3")
	require.Zero(t, code)
	require.Contains(t, out, "sent 3 orders")
	p.waitEnded("o-f1", "o-f2", "o-s1")

	code, _, errs = p.ctl("", "submit", filepath.Join(t.TempDir(), "missing.json"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no such file")
	code, _, errs = p.ctl("", "submit")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "sasctl submit: need exactly one FILE (or - for stdin), or --generate N")
	code, _, errs = p.ctl("", "submit", "--generate", "2", "orders.json")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `unexpected argument "orders.json"`)
	code, _, errs = p.ctl("[{", "submit", "-")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "not one")
}

// With the deployment's workflow files, submit checks each order as
// Submission does: the workflow it names, then that workflow's schema; an
// order either would refuse is not sent, and is named with the reason.
func TestSubmitChecksTheWorkflowsSchema(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	examples := filepath.Join("..", "..", "shared", "workflow", "examples")
	files := filepath.Join(examples, "order.yaml") + "," + filepath.Join(examples, "approval.yaml")
	noQuantity := `{"orderId":"o-w2","customerId":"c-1","items":[{"sku":"A","quantity":0,"unitPriceCents":1}]}`
	returns := `{"orderId":"o-w3","workflow":"returns","customerId":"c-1","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`
	code, out, errs := p.ctl(orderJSON("o-w1")+"\n"+noQuantity+"\n"+returns+"\n", "submit", "-", "--workflows", files)
	require.Equal(t, 1, code, errs)
	require.Equal(t, "sent 1 orders to "+p.prefix+"-orders\n", out)
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	require.Len(t, lines, 3, errs)
	require.Equal(t, submitHint, lines[2])
	require.Regexp(t, `^sasctl submit: order 2 not sent: order o-w2: items\[0\]\.quantity: .+ \(workflow order's schema\)$`, lines[0])
	require.Equal(t, `sasctl submit: order 3 not sent: order o-w3: workflow "returns" is not one this deployment runs (order, approval)`, lines[1])
	p.waitEnded("o-w1")

	code, _, errs = p.ctl("", "submit", "-", "--workflows", filepath.Join(examples, "none.yaml"))
	require.Equal(t, 2, code, "a workflow file that cannot be read: nothing done")
	require.Contains(t, errs, "--workflows: ")
}

func TestListByStateAndPaging(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.sim.SetFaults("inventory", remotesim.Faults{PermanentOrders: []string{"o-l2", "o-l3"}})
	for _, id := range []string{"o-l1", "o-l2", "o-l3"} {
		code, _, _ := p.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code)
	}
	p.waitEnded("o-l1", "o-l2", "o-l3")
	code, out, _ := p.ctl("", "list", "--state", "failed")
	require.Zero(t, code)
	require.Contains(t, out, "o-l2")
	require.Contains(t, out, "o-l3")
	require.NotContains(t, out, "o-l1")

	var page listPage
	p.json("list", &page, "list", "--state", "Failed", "--limit", "1")
	require.Len(t, page.Orders, 1)
	require.NotEmpty(t, page.Next)
	first := page.Orders[0]
	require.Equal(t, workflow.Failed, first.State)
	require.Equal(t, "order", first.Workflow)
	require.Contains(t, first.LastError, "reserve-inventory: remote refused the request permanently")
	require.False(t, first.CompletedAt.IsZero())
	code, out, _ = p.ctl("", "list", "--state", "Failed", "--limit", "1", "--next", page.Next)
	require.Zero(t, code)
	require.Contains(t, out, map[string]string{"o-l2": "o-l3", "o-l3": "o-l2"}[first.OrderID], "the second page has the other one")

	p.json("list", &page, "list")
	require.GreaterOrEqual(t, len(page.Orders), 3)
	require.True(t, slices.IsSortedFunc(page.Orders, func(a, b operator.Order) int { return b.CreatedAt.Compare(a.CreatedAt) }),
		"newest first")
	// Searched: by id prefix, workflow and age, server-side.
	ids := func(args ...string) []string {
		var page listPage
		p.json("list", &page, "list", args...)
		var out []string
		for _, o := range page.Orders {
			out = append(out, o.OrderID)
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, []string{"o-l2"}, ids("--id-prefix", "o-l2"))
	require.Equal(t, []string{"o-l1", "o-l2", "o-l3"}, ids("--workflow", "order", "--newer-than", "1h"))
	require.Empty(t, ids("--older-than", "1h"))
	require.Empty(t, ids("--workflow", "approval"))
	require.Equal(t, []string{"o-l2", "o-l3"}, ids("--state", "failed", "--id-prefix", "o-l"))
	code, out, _ = p.ctl("", "list", "--state", "Failed", "--id-prefix", "o-l", "--limit", "1")
	require.Zero(t, code)
	require.Contains(t, out, "more: sasctl list --state Failed --id-prefix o-l --next ", "the next page's command keeps the search")
	code, _, errs := p.ctl("", "list", "--older-than", "1h", "--newer-than", "10m")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "no order is older than 1h and newer than 10m")

	code, _, errs = p.ctl("", "list", "--state", "Stuck")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `unknown state "Stuck"; the states are Pending, Held, Compensating, Processed, Failed, CompensationFailed, Cancelled`)
	code, _, errs = p.ctl("", "list", "--next", "nonsense")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "bad page token")
}

func TestWatchCountsByState(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	code, _, _ := p.ctl("", "submit", "--generate", "4")
	require.Zero(t, code)
	// Until Submission accepts them, nothing is in flight and --until-idle
	// would rightly stop at once: wait for the four orders to exist.
	require.Eventually(t, func() bool {
		counts, err := p.stack.Store.Census(context.Background(), time.Now())
		total := 0
		for _, n := range counts.ByState {
			total += n
		}
		return err == nil && total == 4
	}, 30*time.Second, 50*time.Millisecond, "orders not accepted")
	code, out, _ := p.ctl("", "watch", "--until-idle", "--every", "100ms")
	require.Zero(t, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	require.Contains(t, last, "4 orders, 0 in flight | Pending 0, Held 0, Compensating 0, Processed 4")
	require.Contains(t, last, "[##############################]")
	require.Contains(t, last, "steps: 0 waiting for a claim (longest 0s), 0 running, 0 parked")
	var snap snapshot
	p.json("watch", &snap, "watch", "--once")
	require.Equal(t, 4, snap.Total)
	require.Len(t, snap.Queues, 7, "the scheduler queue and each agent's request and response queues, the agents found from the queues")
	require.Equal(t, 4, snap.ByState["Processed"])
	require.Zero(t, snap.LongestWait)
}

func TestUnknownDeploymentSaysSo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"submit", "--generate", "1"}, {"status", "o-1"}, {"list"}, {"watch", "--once"},
		{"resubmit", "o-1"}, {"redrive"}, {"signal", "o-1", "approved"},
	} {
		var out, errb bytes.Buffer
		full := append([]string{args[0], "--endpoint", motoEndpoint, "--prefix", "nowhere"}, args[1:]...)
		code := run(context.Background(), full, strings.NewReader(""), &out, &errb)
		require.Equal(t, 1, code, args)
		require.Contains(t, errb.String(), "sasctl "+args[0]+": no deployment \"nowhere\" at this endpoint", args)
		require.Equal(t, 1, strings.Count(errb.String(), "\n"), "one line")
	}
	var errb bytes.Buffer
	code := run(context.Background(), []string{"watch", "--bogus"}, strings.NewReader(""), &bytes.Buffer{}, &errb)
	require.Equal(t, 2, code)
	require.Equal(t, "sasctl watch: unknown flag: --bogus\nRun 'sasctl watch --help' for usage.\n", errb.String())
}
