package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
)

// devProcess is a `sasctl dev` a test started as a real subprocess.
type devProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	runDir string
	mu     sync.Mutex
	lines  []string // what it printed so far
	more   chan struct{}
	done   chan struct{} // closed when it exited
	pids   map[string]int
}

// buildSasctl builds the sasctl binary into a temporary folder.
func buildSasctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sasctl")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// devEnv is the test's environment without what would point sasctl dev or
// sasctl elsewhere (an emulator, a prefix).
func devEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL") && !strings.HasPrefix(kv, "SAS_") {
			env = append(env, kv)
		}
	}
	return env
}

// startDev starts `sasctl dev` on free ports, with its run folder runDir
// and more flags, and waits until it says it is ready; a cleanup interrupts it if the test
// did not.
func startDev(t *testing.T, bin, runDir string, more ...string) *devProcess {
	t.Helper()
	args := append([]string{"dev", "--run-dir", runDir, "--cache-dir", emulatortest.CacheDir(),
		"--moto-port", "0", "--dynamodb-port", "0", "--listen", "127.0.0.1:0",
		"--supervisor-every", "200ms", "--pickup-timeout", "2s"}, more...)
	cmd := exec.Command(bin, args...)
	cmd.Env = devEnv()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	d := &devProcess{t: t, cmd: cmd, runDir: runDir, more: make(chan struct{}, 1), done: make(chan struct{})}
	go d.read(stdout)
	t.Cleanup(func() {
		if d.running() {
			d.interrupt()
		}
	})
	d.waitLine("ready", 3*time.Minute) // a first run installs DynamoDB Local
	d.pids = d.started()
	return d
}

// read keeps what the process prints, line by line, then waits for it.
func (d *devProcess) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		d.mu.Lock()
		d.lines = append(d.lines, sc.Text())
		d.mu.Unlock()
		select {
		case d.more <- struct{}{}:
		default:
		}
	}
	_ = d.cmd.Wait()
	close(d.done)
}

func (d *devProcess) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// output is everything printed so far.
func (d *devProcess) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

// line returns the first line printed that starts with prefix.
func (d *devProcess) line(prefix string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.lines {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

// waitLine waits until a line starting with prefix is printed, and returns it.
func (d *devProcess) waitLine(prefix string, timeout time.Duration) string {
	d.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if l, ok := d.line(prefix); ok {
			return l
		}
		select {
		case <-d.more:
		case <-d.done:
			if l, ok := d.line(prefix); ok {
				return l
			}
			d.t.Fatalf("sasctl dev exited before printing %q:\n%s", prefix, d.output())
		case <-deadline.C:
			d.t.Fatalf("sasctl dev printed no %q in %s:\n%s", prefix, timeout, d.output())
		}
	}
}

// exports are the variables of the `export NAME=VALUE` lines it printed.
func (d *devProcess) exports() map[string]string {
	env := map[string]string{}
	for _, l := range strings.Split(d.output(), "\n") {
		if kv, ok := strings.CutPrefix(l, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	return env
}

// pastedEnv is a user's shell with only the printed lines pasted: PATH and
// the exports.
func (d *devProcess) pastedEnv() []string {
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range d.exports() {
		env = append(env, k+"="+v)
	}
	return env
}

// started are the processes it started, by name (dev.json), and any other
// process descended from it (there should be none: the runner, the simulator
// and the console run inside it).
func (d *devProcess) started() map[string]int {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.runDir, "dev.json"))
	require.NoError(d.t, err)
	var s devState
	require.NoError(d.t, json.Unmarshal(b, &s))
	require.Equal(d.t, d.cmd.Process.Pid, s.PID)
	require.Contains(d.t, s.Processes, "moto_server")
	require.Contains(d.t, s.Processes, "DynamoDB Local")
	pids := s.Processes
	for _, pid := range descendants(d.cmd.Process.Pid) {
		pids[fmt.Sprintf("descendant %d", pid)] = pid
	}
	return pids
}

// interrupt sends SIGINT, as Ctrl-C does, and waits until it exits.
func (d *devProcess) interrupt() {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Signal(os.Interrupt))
	select {
	case <-d.done:
	case <-time.After(90 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		d.t.Fatalf("sasctl dev did not exit within 90 s of SIGINT:\n%s", d.output())
	}
}

// procStat reads a process's state and parent from /proc (ok false: gone).
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	fields := strings.Fields(rest)
	ppid, _ = strconv.Atoi(fields[1])
	return fields[0][0], ppid, true
}

// processAlive: the process exists and has not exited (a zombie has).
func processAlive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z'
}

// descendants are the live processes whose chain of parents leads to pid.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			if _, pp, ok := procStat(p); ok {
				parent[p] = pp
			}
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

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
		Task struct{ State, Workflow string }
	}
	if json.Unmarshal([]byte(out), &st) != nil {
		return "", ""
	}
	return st.Task.State, st.Task.Workflow
}

// orderBody is an order that runs the workflow named ("": the default).
func orderBody(id, workflow string) string {
	return fmt.Sprintf(`{"orderId":%q,"customerId":"c-1","items":[{"sku":"A","quantity":1,"unitPriceCents":1999}],"workflow":%q}`,
		id, workflow)
}

// sendWithGoSDK sends an order with a plain AWS SDK client configured from
// the printed lines only, as a user's own Go program would.
func sendWithGoSDK(t *testing.T, env map[string]string, id string) {
	client := sqs.NewFromConfig(aws.Config{Region: env["AWS_REGION"], BaseEndpoint: aws.String(env["AWS_ENDPOINT_URL"]),
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
	d := startDev(t, bin, runDir, "--workflows", filepath.Join(examples, "order.yaml")+","+filepath.Join(examples, "single.yaml"))
	env := d.pastedEnv()
	for _, prefix := range []string{"export AWS_ENDPOINT_URL=http://127.0.0.1:", "export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:",
		"export AWS_REGION=", "export AWS_ACCESS_KEY_ID=test", "export AWS_SECRET_ACCESS_KEY=test", "export SAS_PREFIX=sas-dev",
		"orders queue: http://127.0.0.1:", "orders table: sas-dev-orders", "state table: sas-dev-state", "console: http://127.0.0.1:"} {
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
	d.requireConsole()
	code, out = sasctlAs(t, bin, devEnv(), "dev", "--run-dir", runDir, "--moto-port", "0", "--dynamodb-port", "0")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "another sasctl dev runs from "+runDir)

	d.requireStopsEverything()
	// The tables survive a restart: the orders are found again.
	again := startDev(t, bin, runDir)
	require.Contains(t, again.waitLine("resources ready: ", time.Second), "found again")
	st, _ := orderState(t, bin, again.pastedEnv(), "dev-go-1")
	require.Equal(t, "Processed", st)
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
		"--supervisor-every must be positive":            {"dev", "--supervisor-every", "0"},
		"transient: 2 is not a share from 0 to 1":        {"dev", "--transient", "2"},
		"--moto-port 70000 is not a port":                {"dev", "--moto-port", "70000"},
		"the console listens on 127.0.0.1 only":          {"dev", "--listen", "0.0.0.0:8090"},
		`unexpected argument "now"`:                      {"dev", "now"},
		"want SERVICE:DURATION":                          {"dev", "faults", "--outage", "payment"},
		`latency: "soon" is not a duration from 0 to 1m`: {"dev", "faults", "--latency", "soon"},
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

	d := newDeployment(t)
	require.NoError(t, d.stack.SendOrders(context.Background(), orderJSON("con-1")))
	d.waitEnded("con-1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"console", "--endpoint", motoEndpoint, "--prefix", d.prefix}, strings.NewReader(""), w, io.Discard)
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
