package tracing

import (
	"context"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// awsSpans adds a client span around each AWS call ("DynamoDB.UpdateItem")
// made within a span (a handler's for a message, a sweep's), with the
// attributes OpenTelemetry's AWS conventions name: what otelaws does,
// without its dependency on the S3 client the product never calls.
func awsSpans(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("sasTracing",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
			middleware.InitializeOutput, middleware.Metadata, error) {
			if !trace.SpanContextFromContext(ctx).IsValid() {
				// A call made for no order (a local runner's poll, an idle
				// receive): no trace of its own, or every second of polling
				// would be one in the collector.
				return next.HandleInitialize(ctx, in)
			}
			service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			ctx, span := Tracer().Start(ctx, service+"."+op, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", service),
					attribute.String("rpc.method", op), attribute.String("cloud.region", awsmiddleware.GetRegion(ctx))))
			defer span.End()
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			return out, md, err
		}), middleware.After)
}
