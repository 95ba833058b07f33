package coldstart_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sas-go/sas/shared/devkit/coldstart"
)

// BenchmarkColdStart is each function's init on this machine: its
// bootstrap built as make build builds it (for this machine's
// architecture, to run it here), run with a deployment's settings against
// a Runtime API of the benchmark's own, timed from exec to its first
// request for an invocation. Its bytes are reported beside it
// (go test -run '^$' -bench ColdStart -benchtime 1x ./shared/devkit/coldstart).
func BenchmarkColdStart(b *testing.B) {
	env := []string{"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=y", "SAS_PREFIX=sas",
		"SAS_AGENT_NAME=inventory", "SAS_QUEUE_URL_BASE=https://sqs.us-east-1.amazonaws.com/000000000000",
		"SAS_ALERT_TOPIC_ARN=arn:aws:sns:us-east-1:000000000000:sas-alerts", "SAS_PAYLOAD_BUCKET=sas-payloads",
		"SAS_REMOTE_BASE_URL=http://127.0.0.1:1", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128"}
	for _, fn := range []string{"agent", "submission", "scheduler", "supervisor"} {
		b.Run(fn, func(b *testing.B) {
			bin := filepath.Join(b.TempDir(), "bootstrap")
			build := exec.Command("go", "build", "-trimpath", "-tags", "lambda.norpc", "-ldflags=-s -w", "-o", bin, "../../../functions/"+fn)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				b.Fatalf("build %s: %v\n%s", fn, err, out)
			}
			info, err := os.Stat(bin)
			if err != nil {
				b.Fatal(err)
			}
			var p50, p90 float64
			for b.Loop() {
				ds, path, err := coldstart.Init(context.Background(), bin, env, 21)
				if err != nil {
					b.Fatal(err)
				}
				if path != "/2018-06-01/runtime/invocation/next" {
					b.Fatalf("%s: its init failed (%s)", fn, path)
				}
				p50, p90 = ds[len(ds)/2].Seconds()*1000, ds[len(ds)*9/10].Seconds()*1000
			}
			b.ReportMetric(p50, "init-p50-ms")
			b.ReportMetric(p90, "init-p90-ms")
			b.ReportMetric(float64(info.Size())/1e6, "MB")
		})
	}
}
