package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/sqsmem"
	"github.com/sas-go/sas/shared/workflow"
)

// localOptions are a local stack's options from the settings' flags, its
// workflows loaded from --workflows and validated as at synth and at a
// Lambda's cold start (none: the example order workflow), checked together
// before anything starts.
func localOptions(f settingFlags) (localrun.Options, error) {
	o := localrun.Options{Prefix: f.Topology.Prefix, Settings: f.Overrides, SupervisorEvery: f.SupervisorRate,
		CensusEvery: f.CensusEvery,
		BatchWindow: f.Topology.BatchWindow, BacklogDepth: f.BacklogDepth, SealData: f.SealData, PayloadInline: f.PayloadInlineBytes}
	if len(f.WorkflowFiles) > 0 {
		set, err := workflow.LoadFiles(f.WorkflowFiles, workflow.Options{})
		if err != nil {
			return o, fmt.Errorf("--workflows: %w", err)
		}
		o.Workflows = set
	}
	if err := o.Check(); err != nil {
		return o, fmt.Errorf("%w (--pickup-timeout, --batch-window-seconds)", err)
	}
	return o, nil
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

// Who serves a local stack's queues (SQS, and the SNS topic of its alerts):
// --queues.
const (
	queuesMoto      = "moto"
	queuesInProcess = "in-process" // as unkind as SQS: sqsmem.SQSLike
	queuesKind      = "kind"       // in process, in send order, each message once, exact depths
)

// queuesFlag registers --queues on fs, into kind: in-process by default,
// unless AWS_ENDPOINT_URL names an emulator (LocalStack), which then serves
// the queues too, as it serves everything else.
func queuesFlag(fs *pflag.FlagSet, kind *string) {
	def := queuesInProcess
	if os.Getenv("AWS_ENDPOINT_URL") != "" {
		def = queuesMoto
	}
	queuesFlagAs(fs, kind, def)
}

// benchQueues is sasctl bench's default --queues: kind in-process queues
// (a cost counts the product's requests, not SQS's rare second delivery),
// or AWS_ENDPOINT_URL's.
func benchQueues() string {
	if os.Getenv("AWS_ENDPOINT_URL") != "" {
		return queuesMoto
	}
	return queuesKind
}

// queuesFlagAs is queuesFlag with its default.
func queuesFlagAs(fs *pflag.FlagSet, kind *string, def string) {
	fs.StringVar(kind, "queues", def, "who serves the queues (SQS, and SNS for the alerts): "+queuesInProcess+
		" (in this process, in Go, in memory, as unkind as SQS: reordered, 1 message in 50 delivered twice, depths up to a second old), "+
		queuesKind+" (the same, in send order, each message once, exact depths), or "+queuesMoto+
		" (moto_server's, or the emulator AWS_ENDPOINT_URL names); moto serves Secrets Manager and SSM either way")
}

// checkQueues says what is wrong with --queues.
func checkQueues(kind string) error {
	if kind != queuesMoto && kind != queuesInProcess && kind != queuesKind {
		return usageErrorf("--queues %s: want %s, %s or %s", kind, queuesInProcess, queuesKind, queuesMoto)
	}
	return nil
}

// localQueues starts the in-process queues on 127.0.0.1:port (0: a free
// port) if kind asks for them, unkind as seed chooses: endpoint is theirs,
// or "" for moto's.
func localQueues(kind string, port int, seed uint64, out io.Writer) (endpoint string, stop func(), err error) {
	var o sqsmem.Options
	how := "in send order, each message once"
	switch kind {
	case queuesInProcess:
		o.Unkind = sqsmem.SQSLike(seed)
		how = fmt.Sprintf("as unkind as SQS (reordered, some delivered twice, approximate depths; seed %d)", seed)
	case queuesKind:
	default:
		return "", func() {}, nil
	}
	mem, err := sqsmem.Listen(fmt.Sprintf("127.0.0.1:%d", port), o)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(out, "queues (SQS, and SNS for the alerts) served in process on %s, in memory, %s\n", mem.Endpoint, how)
	return mem.Endpoint, func() { _ = mem.Close() }, nil
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

// makeDirs makes the folders a local command writes in.
func makeDirs(dirs ...string) error {
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	return nil
}

// startFailed is an error from starting the emulators: a missing
// moto_server is a usage error (nothing was done; the message says what to
// install).
func startFailed(err error) error {
	if errors.Is(err, emulator.ErrMotoMissing) {
		return usageError{err}
	}
	return err
}

// defaultCacheDir is where the local commands install DynamoDB Local on
// first use: SAS_CACHE_DIR if set, else the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS) under
// sas, not the folder sasctl runs in.
func defaultCacheDir() string {
	if d := os.Getenv("SAS_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sas")
	}
	return ".cache"
}
