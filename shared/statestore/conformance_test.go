package statestore_test

import (
	"context"
	"os"
	"testing"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/statestore"
)

var engines = map[string]*awsclient.Clients{}

func TestMain(m *testing.M) {
	ctx := context.Background()
	var procs []*emulator.Process
	code := func() int {
		moto, err := emulatortest.Moto(ctx)
		if err != nil {
			return emulatortest.Fail(err)
		}
		procs = append(procs, moto)
		ddb, err := emulatortest.DynamoDBLocal(ctx)
		if err != nil {
			return emulatortest.Fail(err)
		}
		procs = append(procs, ddb)
		for name, p := range map[string]*emulator.Process{"moto": moto, "dynamodb-local": ddb} {
			c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: p.Endpoint, Emulated: true})
			if err != nil {
				return emulatortest.Fail(err)
			}
			engines[name] = c
		}
		return m.Run()
	}()
	for _, p := range procs {
		_ = p.Stop()
	}
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	for name, c := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) *statestore.Store { return storetest.NewStore(t, c.DynamoDB) })
		})
	}
}
