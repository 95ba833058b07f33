// Package emulator starts and stops the local AWS emulators the tests and the
// local run use: moto_server (SQS, SNS, DynamoDB, …) and DynamoDB Local. Every
// process listens on 127.0.0.1 and a free port, and is stopped by its PID.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a started emulator.
type Process struct {
	Name     string
	Endpoint string // http://127.0.0.1:PORT
	LogPath  string
	cmd      *exec.Cmd
	done     chan struct{}
}

// External returns a Process for an emulator someone else runs (such as
// LocalStack at AWS_ENDPOINT_URL): Stop leaves it alone.
func External(name, endpoint string) *Process { return &Process{Name: name, Endpoint: endpoint} }

// PID is the emulator's process id (0 for an external one).
func (p *Process) PID() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop terminates the emulator's process group and waits for it to exit.
func (p *Process) Stop() error {
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs cmd in its own process group, logging to logPath, and waits
// until an HTTP request to endpoint gets any answer.
func start(ctx context.Context, name string, cmd *exec.Cmd, endpoint, logPath string, timeout time.Duration) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Endpoint: endpoint, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if err := waitHTTP(ctx, p, timeout); err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("start %s (log %s): %w", name, logPath, err)
	}
	return p, nil
}

func waitHTTP(ctx context.Context, p *Process, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+"/", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.done:
			return errors.New("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s", timeout)
		case <-tick.C:
		}
	}
}
