package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
		"--moto-port", "0", "--dynamodb-port", "0", "--queues-port", "0", "--listen", "127.0.0.1:0",
		"--supervisor-rate", "200ms", "--pickup-timeout", "2s"}, more...)
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
