// Package emulatortest starts the emulators for a test binary's TestMain,
// with logs and caches in the module's .cache folder.
package emulatortest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/devkit/sqsmem"
)

// CacheDir is where installed emulators and logs go: $SAS_CACHE_DIR, or
// .cache at the module root (Go skips dot folders).
func CacheDir() string {
	if d := os.Getenv("SAS_CACHE_DIR"); d != "" {
		return d
	}
	dir, _ := os.Getwd()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, ".cache")
		}
	}
	return filepath.Join(os.TempDir(), "sas-cache")
}

func logDir() string {
	d, err := os.MkdirTemp(filepath.Join(CacheDir()), "logs-")
	if err != nil {
		return os.TempDir()
	}
	return d
}

// Moto starts moto_server for a test binary, unless AWS_ENDPOINT_URL names
// an emulator already running (such as LocalStack, for make itest): then the
// tests use that one and leave it running.
func Moto(ctx context.Context) (*emulator.Process, error) {
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		return emulator.External("AWS_ENDPOINT_URL", e), nil
	}
	_ = os.MkdirAll(CacheDir(), 0o755)
	return emulator.StartMoto(ctx, logDir())
}

// DynamoDBLocal starts DynamoDB Local for a test binary.
func DynamoDBLocal(ctx context.Context) (*emulator.Process, error) {
	_ = os.MkdirAll(CacheDir(), 0o755)
	return emulator.StartDynamoDBLocal(ctx, CacheDir(), logDir())
}

// QueuesEnv chooses the queues of a test binary: "in-process" (the default,
// unless AWS_ENDPOINT_URL names an emulator) serves SQS and SNS from
// shared/devkit/sqsmem in the test process (Queues sets the SDK's
// AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL_SNS to it, which take precedence
// over every client's base endpoint), as unkind as SQS
// (sqsmem.SQSLike: reordered, some messages delivered twice, approximate
// depths); "kind", the same queues in send order, each message once, exact
// depths; "moto", moto (or the emulator AWS_ENDPOINT_URL names) serves them.
const QueuesEnv = "SAS_TEST_QUEUES"

// QueueSeedEnv seeds the in-process queues' unkindness (default: the time);
// the seed is printed, so that a run's choices can be made again.
const QueueSeedEnv = "SAS_TEST_QUEUE_SEED"

// Queues starts the in-process queues unless QueuesEnv asks for moto's (or
// AWS_ENDPOINT_URL names an emulator), and points the SDK's SQS and SNS
// clients of this process (and of the processes it starts) at them; stop
// stops them.
func Queues() (stop func(), err error) {
	var o sqsmem.Options
	switch v := os.Getenv(QueuesEnv); v {
	case "moto":
		return func() {}, nil
	case "":
		if os.Getenv("AWS_ENDPOINT_URL") != "" {
			return func() {}, nil
		}
		fallthrough
	case "in-process":
		seed, err := queueSeed()
		if err != nil {
			return nil, err
		}
		o.Unkind = sqsmem.SQSLike(seed)
		fmt.Fprintf(os.Stderr, "in-process queues as unkind as SQS, seed %d (%s=%d makes the same choices; %s=kind: in order, once)\n",
			seed, QueueSeedEnv, seed, QueuesEnv)
	case "kind":
	default:
		return nil, fmt.Errorf("%s=%q: want in-process, kind or moto", QueuesEnv, v)
	}
	mem, err := sqsmem.Listen("", o)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_SNS"} {
		if err := os.Setenv(k, mem.Endpoint); err != nil {
			return nil, fmt.Errorf("set %s: %w", k, err)
		}
	}
	return func() { _ = mem.Close() }, nil
}

// queueSeed is QueueSeedEnv's seed, or one from the clock.
func queueSeed() (uint64, error) {
	v := os.Getenv(QueueSeedEnv)
	if v == "" {
		return uint64(time.Now().UnixNano()), nil
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a number", QueueSeedEnv, v)
	}
	return seed, nil
}

// MainWithMoto is a TestMain body: it starts moto (or uses AWS_ENDPOINT_URL),
// sets *endpoint, runs the tests and stops moto; it returns the exit code.
func MainWithMoto(m *testing.M, endpoint *string) int {
	p, err := Moto(context.Background())
	if err != nil {
		return Fail(err)
	}
	defer p.Stop()
	stopQueues, err := Queues()
	if err != nil {
		return Fail(err)
	}
	defer stopQueues()
	*endpoint = p.Endpoint
	return m.Run()
}

// MainWithMotoAndDynamoDBLocal is a TestMain body for tests that need both:
// moto for SQS and SNS, DynamoDB Local for DynamoDB. With AWS_ENDPOINT_URL
// set (LocalStack), that one endpoint serves everything and *dynamodb is "".
func MainWithMotoAndDynamoDBLocal(m *testing.M, moto, dynamodb *string) int {
	p, err := Moto(context.Background())
	if err != nil {
		return Fail(err)
	}
	defer p.Stop()
	stopQueues, err := Queues()
	if err != nil {
		return Fail(err)
	}
	defer stopQueues()
	if os.Getenv("AWS_ENDPOINT_URL") != "" {
		*moto = p.Endpoint
		return m.Run()
	}
	d, err := DynamoDBLocal(context.Background())
	if err != nil {
		return Fail(err)
	}
	defer d.Stop()
	*moto, *dynamodb = p.Endpoint, d.Endpoint
	return m.Run()
}

// Fail prints why the emulators could not start and returns an exit code.
func Fail(err error) int {
	fmt.Fprintln(os.Stderr, "test set-up:", err)
	return 1
}

// Engine is one DynamoDB engine the state store's tests run on, with moto's
// SQS and SNS beside it.
type Engine struct {
	Clients          *awsclient.Clients
	DynamoDBEndpoint string
}

// MainWithEngines is a TestMain body for tests that run on every DynamoDB
// engine: it starts moto and DynamoDB Local, fills engines ("moto",
// "dynamodb-local"), runs the tests and stops both; it returns the exit code.
func MainWithEngines(m *testing.M, engines map[string]Engine) int {
	ctx := context.Background()
	moto, err := Moto(ctx)
	if err != nil {
		return Fail(err)
	}
	defer moto.Stop()
	stopQueues, err := Queues()
	if err != nil {
		return Fail(err)
	}
	defer stopQueues()
	ddb, err := DynamoDBLocal(ctx)
	if err != nil {
		return Fail(err)
	}
	defer ddb.Stop()
	for name, p := range map[string]*emulator.Process{"moto": moto, "dynamodb-local": ddb} {
		c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: moto.Endpoint, DynamoDBEndpoint: p.Endpoint, Emulated: true})
		if err != nil {
			return Fail(err)
		}
		engines[name] = Engine{Clients: c, DynamoDBEndpoint: p.Endpoint}
	}
	return m.Run()
}
