package otelretry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retrytest"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// With otelhttp, in the order a user would write them: otelhttp below
// retryhttp, so that each attempt is an otelhttp client span, all in the
// caller's trace. The other order, otelhttp above retryhttp, gives one span
// for the whole request and hides the attempts: the same trace context goes
// out on every attempt, and the retries do not show.
func TestWithOtelhttp(t *testing.T) {
	for _, tt := range []struct {
		name  string
		rt    func(tp *sdktrace.TracerProvider) http.RoundTripper
		spans int
	}{
		{"otelhttp below retryhttp: a span per attempt", func(tp *sdktrace.TracerProvider) http.RoundTripper {
			return retryhttp.New(otelhttp.NewTransport(http.DefaultTransport,
				otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{})),
				retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond)))
		}, 3},
		{"otelhttp above retryhttp: one span, attempts hidden", func(tp *sdktrace.TracerProvider) http.RoundTripper {
			return otelhttp.NewTransport(retryhttp.New(http.DefaultTransport, retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond))),
				otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
		}, 1},
		{"otelretry: the request's span and a span per attempt", func(tp *sdktrace.TracerProvider) http.RoundTripper {
			return New(http.DefaultTransport, Config{TracerProvider: tp, Propagators: propagation.TraceContext{}},
				retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond)))
		}, 4},
	} {
		srv := retrytest.NewServer(retrytest.Status(503), retrytest.Status(503))
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		parentCtx, parent := tp.Tracer("test").Start(context.Background(), "caller")
		req, _ := http.NewRequestWithContext(parentCtx, "GET", srv.URL+"/x", nil)
		resp, err := tt.rt(tp).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		parent.End()
		spans := rec.Ended()
		if got := len(spans) - 1; got != tt.spans {
			t.Errorf("%s: %d spans besides the caller's, want %d", tt.name, got, tt.spans)
		}
		for _, s := range spans {
			if s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("%s: span %q not in the caller's trace", tt.name, s.Name())
			}
		}
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// BenchmarkNotSampled measures what tracing costs when it is on but the
// request is not sampled, against retryhttp alone, in memory.
func BenchmarkNotSampled(b *testing.B) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}
	base := retrytest.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"retryhttp", retryhttp.New(base)},
		{"otelretry-not-sampled", New(base, Config{TracerProvider: tp, Propagators: propagation.TraceContext{}})},
	} {
		b.Run("rt="+c.name, func(b *testing.B) {
			req, _ := http.NewRequest("GET", "http://api.test/", nil)
			b.ReportAllocs()
			for b.Loop() {
				c.rt.RoundTrip(req)
			}
		})
	}
}

// A retryhttp Transport hidden below otelhttp, which has no Unwrap and
// sends a clone with a context of its own, passes each attempt of the
// outer one through once: one retry owner, not 3×3 attempts.
func TestNestedThroughOtelhttp(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	base := retrytest.NewScriptTransport(steps(503, 503, 503, 503, 503, 503, 503, 503, 503)...)
	inner := retryhttp.New(base, retryhttp.WithBackoff(retryhttp.Constant(0)), retryhttp.WithMaxAttempts(3))
	outer := retryhttp.New(otelhttp.NewTransport(inner, otelhttp.WithTracerProvider(tp)),
		retryhttp.WithBackoff(retryhttp.Constant(0)), retryhttp.WithMaxAttempts(3))
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://example.test/", nil)
	resp, err := outer.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != 3 {
		t.Errorf("%d attempts reached the server, want 3", base.Count())
	}
}
