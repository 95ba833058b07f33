package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// sasctlAs runs the binary with env and returns its exit code and output.
func sasctlAs(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	require.NoError(t, err)
	return 0, string(out)
}

// orderState is the state and workflow `sasctl status ORDER` reports with
// env ("" if it fails).
func orderState(t *testing.T, bin string, env []string, id string) (state, workflow string) {
	code, out := sasctlAs(t, bin, env, "status", "--output", "json", id)
	if code != 0 {
		return "", ""
	}
	var st struct {
		Order struct{ State, Workflow string }
	}
	if json.Unmarshal([]byte(out), &st) != nil {
		return "", ""
	}
	return st.Order.State, st.Order.Workflow
}

// orderBody is an order that runs the workflow named ("": the default).
func orderBody(id, workflow string) string {
	return fmt.Sprintf(`{"orderId":%q,"customerId":"c-1","items":[{"sku":"A","quantity":1,"unitPriceCents":1999}],"workflow":%q}`,
		id, workflow)
}

// sendWithGoSDK sends an order with a plain AWS SDK client configured from
// the printed lines only, as a user's own Go program would: the SQS
// endpoint's own variable first, as config.LoadDefaultConfig reads them.
func sendWithGoSDK(t *testing.T, env map[string]string, id string) {
	endpoint := env["AWS_ENDPOINT_URL_SQS"]
	if endpoint == "" {
		endpoint = env["AWS_ENDPOINT_URL"]
	}
	client := sqs.NewFromConfig(aws.Config{Region: env["AWS_REGION"], BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], "")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env["SAS_ORDERS_QUEUE_URL"]),
		MessageBody: aws.String(orderBody(id, ""))})
	require.NoError(t, err)
}

// sendWithBoto3 sends an order of the single workflow with boto3 (it comes
// with moto), in a process whose environment holds only PATH and the printed
// lines, as docs/local.md shows.
func sendWithBoto3(t *testing.T, env []string, id string) {
	script := `import os, sys, boto3
boto3.client("sqs").send_message(QueueUrl=os.environ["SAS_ORDERS_QUEUE_URL"], MessageBody=sys.argv[1])`
	cmd := exec.Command("python3", "-c", script, orderBody(id, "single"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "boto3: %s", out)
}

func TestDevServesUntilInterruptedAndLeavesNoProcess(t *testing.T) {
	bin, runDir := buildSasctl(t), t.TempDir()
	examples := filepath.Join("..", "..", "shared", "workflow", "examples")
	ledger, ownFile := ownService(t)
	workflows := filepath.Join(examples, "order.yaml") + "," + filepath.Join(examples, "single.yaml") + "," + ownFile
	d := startDev(t, bin, runDir, "--workflows", workflows)
	env := d.pastedEnv()
	for _, prefix := range []string{"export AWS_ENDPOINT_URL=http://127.0.0.1:", "export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:",
		"export AWS_ENDPOINT_URL_SQS=http://127.0.0.1:", "export AWS_ENDPOINT_URL_SNS=http://127.0.0.1:",
		"export AWS_REGION=", "export AWS_ACCESS_KEY_ID=test", "export AWS_SECRET_ACCESS_KEY=test", "export SAS_PREFIX=sas",
		"orders queue: http://127.0.0.1:", "orders table: sas-orders", "state table: sas-state", "console: http://127.0.0.1:"} {
		d.waitLine(prefix, time.Second)
	}
	t.Logf("sasctl dev printed:\n%s", d.output())

	sendWithGoSDK(t, d.exports(), "dev-go-1")
	sendWithBoto3(t, env, "dev-boto-1")
	for id, workflow := range map[string]string{"dev-go-1": "order", "dev-boto-1": "single"} {
		require.Eventually(t, func() bool {
			st, wf := orderState(t, bin, env, id)
			return st == "Processed" && wf == workflow
		}, 60*time.Second, 200*time.Millisecond, "order %s reaches Processed (%s), as sasctl status sees it with only the printed lines", id, workflow)
	}
	code, out := sasctlAs(t, bin, env, "status", "dev-go-1")
	require.Zero(t, code, out)
	require.Contains(t, out, "Order dev-go-1: Processed")
	d.requireFaultsChange(bin)
	d.requireFaultProxy(bin, env, ledger)
	d.requireConsole()
	code, out = sasctlAs(t, bin, devEnv(), "dev", "--run-dir", runDir, "--moto-port", "0", "--dynamodb-port", "0", "--queues-port", "0")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "another sasctl dev runs from "+runDir)

	d.requireStopsEverything()
	// The tables survive a restart: the orders are found again. This time
	// the queues are moto's (--queues moto): boto3 and sasctl reach them with
	// only the printed lines (no AWS_ENDPOINT_URL_SQS among them).
	again := startDev(t, bin, runDir, "--workflows", workflows, "--queues", "moto")
	require.Contains(t, again.waitLine("resources ready: ", time.Second), "found again")
	env = again.pastedEnv()
	require.NotContains(t, again.output(), "AWS_ENDPOINT_URL_SQS", "moto serves the queues")
	st, _ := orderState(t, bin, env, "dev-go-1")
	require.Equal(t, "Processed", st)
	sendWithBoto3(t, env, "dev-boto-2")
	require.Eventually(t, func() bool {
		st, _ := orderState(t, bin, env, "dev-boto-2")
		return st == "Processed"
	}, 60*time.Second, 200*time.Millisecond, "an order through moto's queues reaches Processed")
	again.requireStopsEverything()
}

// requireFaultsChange changes the running simulator's faults with sasctl dev
// faults, then clears them.
func (d *devProcess) requireFaultsChange(bin string) {
	t := d.t
	t.Helper()
	code, out := sasctlAs(t, bin, devEnv(), "dev", "faults", "--run-dir", d.runDir, "--transient", "0.3", "--outage", "payment:2m")
	require.Zero(t, code, out)
	require.Contains(t, out, "every service: 30% transient 503s")
	require.Regexp(t, `payment: 30% transient 503s, outage until \S+ \(2m0s left\)`, out)
	code, out = sasctlAs(t, bin, devEnv(), "dev", "faults", "--run-dir", d.runDir, "--clear")
	require.Zero(t, code, out)
	require.Contains(t, out, "none: every remote call succeeds")
}

// requireConsole checks the console answers at the address printed.
func (d *devProcess) requireConsole() {
	console := strings.TrimPrefix(d.waitLine("console: ", time.Second), "console: ")
	resp, err := http.Get(console)
	require.NoError(d.t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(d.t, err)
	require.Equal(d.t, http.StatusOK, resp.StatusCode)
	require.Contains(d.t, string(body), "sas console")
}

func TestDevRefusesBadFlagsBeforeStartingAnything(t *testing.T) {
	empty := t.TempDir()
	for want, args := range map[string][]string{
		`invalid argument "0" for "--supervisor-rate" flag: must be at least 1ms, not 0s`:  {"dev", "--supervisor-rate", "0"},
		`invalid argument "10ms" for "--census-every" flag: must be at least 1s, not 10ms`: {"dev", "--census-every", "10ms"},
		"transient: 2 is not a share from 0 to 1":                                          {"dev", "--transient", "2"},
		"--moto-port 70000 is not a port":                                                  {"dev", "--moto-port", "70000"},
		"--queues sqlite: want in-process, kind or moto":                                   {"dev", "--queues", "sqlite"},
		"the console listens on 127.0.0.1 only":                                            {"dev", "--listen", "0.0.0.0:8090"},
		`unknown command "now"`:                                                            {"dev", "now"},
		"--otlp 127.0.0.1:4318 is not an http(s) URL":                                      {"dev", "--otlp", "127.0.0.1:4318"},
		"want SERVICE:DURATION":                                                            {"dev", "faults", "--outage", "payment"},
		`latency: "soon" is not a duration from 0 to 1m`:                                   {"dev", "faults", "--latency", "soon"},
	} {
		code, _, stderr := sasctl(t, args...)
		require.Equal(t, 2, code, want)
		require.Contains(t, stderr, want)
	}
	code, _, stderr := sasctl(t, "dev", "faults", "--run-dir", empty)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no sasctl dev runs from "+empty)
	code, _, stderr = sasctl(t, "dev", "--run-dir", empty, "--workflows", filepath.Join(empty, "missing.yaml"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--workflows")
	require.NoFileExists(t, filepath.Join(empty, "dev.json"), "nothing started")

	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // pasted from a sasctl dev that has stopped
	code, _, stderr = sasctl(t, "dev", "--run-dir", empty)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "nothing answers at AWS_ENDPOINT_URL=http://127.0.0.1:1")
	require.Contains(t, stderr, "unset AWS_ENDPOINT_URL")
}

// requireStopsEverything interrupts sasctl dev and checks that it exits at
// once, says it stopped each process it started, and left none running.
func (d *devProcess) requireStopsEverything() {
	t := d.t
	t.Helper()
	d.interrupt()
	require.Zero(t, d.cmd.ProcessState.ExitCode(), d.output())
	out := d.output()
	for name, pid := range d.pids {
		if !strings.HasPrefix(name, "descendant") {
			require.Contains(t, out, fmt.Sprintf("stopped %s (pid %d)", name, pid))
		}
		require.False(t, processAlive(pid), "%s (pid %d) still runs", name, pid)
	}
	_, err := os.Stat(filepath.Join(d.runDir, "dev.json"))
	require.ErrorIs(t, err, os.ErrNotExist, "dev.json removed")
}

func TestConsoleCommandServesADeploymentOnLoopbackOnly(t *testing.T) {
	code, _, stderr := sasctl(t, "console", "--listen", "0.0.0.0:0")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "the console listens on 127.0.0.1 only")

	p := newPipeline(t)
	require.NoError(t, p.stack.SendOrders(context.Background(), orderJSON("con-1")))
	p.waitEnded("con-1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"console", "--endpoint", motoEndpoint, "--prefix", p.prefix}, strings.NewReader(""), w, io.Discard)
		_ = w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, out) }()
	base, ok := strings.CutPrefix(strings.Fields(line)[1], "http://127.0.0.1:")
	require.True(t, ok, line)
	resp, err := http.Get("http://127.0.0.1:" + base + "orders/con-1")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `data-state="Processed"`)
	cancel()
	require.Zero(t, <-done, "Ctrl-C stops it cleanly")
}

// ownService is a service of the test's own (it keeps the idempotency keys
// of the calls it receives) and a workflow file whose agent calls it.
func ownService(t *testing.T) (*keys, string) {
	t.Helper()
	k := &keys{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.add(r.Header.Get("Idempotency-Key"))
		fmt.Fprint(w, `{"booked":true}`)
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "own.yaml")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`name: own
defaults: {timeout: 5s, maxFailures: 2}
agents:
  ledger: {endpoint: %q}
steps:
  - name: book
    agent: ledger
`, srv.URL+"/books")), 0o644))
	return k, file
}

// keys are the idempotency keys a service received.
type keys struct {
	mu   sync.Mutex
	seen []string
}

func (k *keys) add(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen = append(k.seen, key)
}

func (k *keys) has(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Contains(k.seen, key)
}

// requireFaultProxy: sasctl dev put its fault proxy in front of the
// agent whose service is the test's own; an order goes through it; with the
// service refused for good by sasctl dev faults, an order fails and the
// service never sees its call.
func (d *devProcess) requireFaultProxy(bin string, env []string, ledger *keys) {
	t := d.t
	t.Helper()
	line := d.waitLine("fault proxy for agent ledger: ", time.Second)
	require.Contains(t, line, "/v1/proxy/ledger -> http://127.0.0.1:")
	send := func(id string) {
		c := exec.Command(bin, "submit", "-")
		c.Env = env
		c.Stdin = strings.NewReader(fmt.Sprintf(`{"orderId":%q,"workflow":"own","customerId":"c","items":[]}`, id))
		out2, err := c.CombinedOutput()
		require.NoError(t, err, "%s", out2)
	}
	waitState := func(id, state string) {
		require.Eventually(t, func() bool { st, _ := orderState(t, bin, env, id); return st == state }, 60*time.Second,
			200*time.Millisecond, "order %s reaches %s", id, state)
	}
	send("dev-own-1")
	waitState("dev-own-1", "Processed")
	require.True(t, ledger.has("dev-own-1/book"), "the call went through the proxy to the service")
	code, out := sasctlAs(t, bin, devEnv(), "dev", "faults", "--run-dir", d.runDir, "--service", "ledger", "--permanent", "1")
	require.Zero(t, code, out)
	send("dev-own-2")
	waitState("dev-own-2", "Failed")
	require.False(t, ledger.has("dev-own-2/book"), "refused by the proxy: the service never saw it")
	code, out = sasctlAs(t, bin, devEnv(), "dev", "faults", "--run-dir", d.runDir, "--clear")
	require.Zero(t, code, out)
}

// sasctl dev's fault proxy goes in front of each HTTP agent whose service
// is not the simulator, but one that signs its calls (a proxy would break
// the signature); a custom agent calls nothing.
func TestTheFaultProxyGoesInFrontOfEachOwnService(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("w.yaml", []byte(`name: w
defaults: {timeout: 5s}
agents:
  sim: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/sim"}
  own: {endpoint: "https://own.example/api"}
  var: {endpoint: "${OWN_URL}/x"}
  signed: {endpoint: "https://signed.example", auth: {sigv4: {service: execute-api, region: eu-west-1}}}
  code: {custom: true}
steps:
  - {name: a, agent: sim}
  - {name: b, agent: own}
  - {name: c, agent: var}
  - {name: d, agent: signed}
  - {name: e, agent: code}
`), workflow.Options{})
	require.NoError(t, err)
	simulated, own, unproxied := agentsByEndpoint(workflow.MustSet(d), map[string]string{"OWN_URL": "http://127.0.0.1:9"})
	require.Equal(t, []string{"sim"}, simulated)
	require.Equal(t, map[string]string{"own": "https://own.example/api", "var": "http://127.0.0.1:9/x"}, own)
	require.Equal(t, []string{"signed"}, unproxied)
}
