//go:build !otlp

package tracing

import (
	"context"
	"fmt"
)

// setupOTLP: this build has no OTLP exporter (see Setup).
func setupOTLP(context.Context, string) (func(context.Context) error, error) {
	return nil, fmt.Errorf("%s=otlp, but this binary was built without the OTLP exporter: build it with the tag otlp "+
		"(make build TRACING=otlp)", Env)
}
