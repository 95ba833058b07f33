package sqsconf_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/sqsconf"
	"github.com/sas-go/sas/shared/devkit/sqsmem"
)

var motoEndpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &motoEndpoint)) }

// TestConformance runs the suite against moto (or AWS_ENDPOINT_URL's
// emulator) and against the in-process queues.
func TestConformance(t *testing.T) {
	mem, err := sqsmem.Listen("", sqsmem.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	targets := map[string]struct {
		endpoint string
		gaps     map[string]string
	}{"moto": {motoEndpoint, sqsconf.MotoGaps}, "in-process": {mem.Endpoint, nil}}
	for name, tg := range targets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: tg.endpoint, QueuesEndpoint: tg.endpoint, Emulated: true})
			require.NoError(t, err)
			sqsconf.Run(t, sqsconf.Target{SQS: c.SQS, SNS: c.SNS, Gaps: tg.gaps})
		})
	}
}
