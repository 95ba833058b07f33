// Package coldstart measures a Lambda function's init: from the exec of its
// bootstrap to its first request to the Lambda Runtime API, against a
// Runtime API of its own, so that what a cold start costs is a figure, not
// a guess from the binary's bytes.
package coldstart

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"time"
)

// Init runs bin n times with env (the function's settings) and returns each
// run's time from exec to its first Runtime API request, sorted, and that
// request's path (the next invocation, or an init error).
func Init(ctx context.Context, bin string, env []string, n int) ([]time.Duration, string, error) {
	var out []time.Duration
	var first string
	for range n {
		d, path, err := once(ctx, bin, env)
		if err != nil {
			return nil, "", err
		}
		out, first = append(out, d), path
	}
	slices.Sort(out)
	return out, first, nil
}

func once(ctx context.Context, bin string, env []string) (time.Duration, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, "", err
	}
	got := make(chan string, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.URL.Path:
		default:
		}
		<-r.Context().Done() // the runtime waits for an invocation: none comes
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(append(os.Environ(), "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String()), env...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("start %s: %w", bin, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case path := <-got:
		return time.Since(start), path, nil
	case err := <-exited:
		return 0, "", fmt.Errorf("%s exited before asking the Runtime API for an invocation: %v", bin, err)
	case <-time.After(30 * time.Second):
		return 0, "", fmt.Errorf("%s asked the Runtime API nothing in 30 s", bin)
	}
}
