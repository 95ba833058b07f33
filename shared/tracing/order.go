package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// An order is one trace from its submission to its end, whatever brings
// its next step: the messages between its handlers carry the trace
// context, and what comes from outside its messages (an event, an async
// call's callback, the Supervisor's wake) joins the trace its order keeps
// (its state item's traceparent, Context's when it was accepted).

// Context is ctx's trace context as a W3C traceparent, to keep with an
// order ("": ctx has no span: tracing is off).
func Context(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c.Get("traceparent")
}

// Join is ctx in the trace of an order, which kept stored (Context's), in a
// span named name, a child of the order's and linked to ctx's own span (the
// message, or the sweep, that brought what happens now). With no trace
// kept, or tracing off, it is ctx and a span that records nothing.
func Join(ctx context.Context, stored, name string) (context.Context, trace.Span) {
	none := trace.SpanFromContext(context.Background())
	if stored == "" || !Enabled() {
		return ctx, none
	}
	sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": stored}))
	if !sc.IsValid() {
		return ctx, none
	}
	var opts []trace.SpanStartOption
	if own := trace.SpanContextFromContext(ctx); own.IsValid() && own.TraceID() != sc.TraceID() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: own}))
	}
	return Tracer().Start(trace.ContextWithRemoteSpanContext(ctx, sc), name, opts...)
}
