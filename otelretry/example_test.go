package otelretry_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/otelretry"
	"github.com/retryhttp/retryhttp/retrytest"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A GET that meets two 503s, then succeeds: the trace has the request's
// span and one client span per attempt, printed here as a tree.
func ExampleNew() {
	srv := retrytest.NewServer(retrytest.Status(503), retrytest.Status(503))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))

	client := &http.Client{Transport: otelretry.New(nil,
		otelretry.Config{TracerProvider: tp, Propagators: propagation.TraceContext{}},
		retryhttp.WithBackoff(retryhttp.Constant(10*time.Millisecond)))}
	resp, err := client.Get(srv.URL + "/v1/rates")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	client.CloseIdleConnections()

	spans := rec.Ended()
	root := spans[len(spans)-1]
	fmt.Println(root.Name(), show(root, "retryhttp.attempts", "http.response.status_code"))
	for _, s := range spans[:len(spans)-1] {
		fmt.Println("└─", s.Name(), show(s, "retry.attempt", "http.request.resend_count",
			"retry.delay_ms", "downstream.service", "retryhttp.outcome", "retryhttp.next_delay_ms"))
	}
	// Output:
	// retryhttp GET retryhttp.attempts=3 http.response.status_code=200
	// └─ GET retry.attempt=1 downstream.service=default retryhttp.outcome=503 retryhttp.next_delay_ms=10
	// └─ GET retry.attempt=2 http.request.resend_count=1 retry.delay_ms=10 downstream.service=default retryhttp.outcome=503 retryhttp.next_delay_ms=10
	// └─ GET retry.attempt=3 http.request.resend_count=2 retry.delay_ms=10 downstream.service=default retryhttp.outcome=200
}

func show(s sdktrace.ReadOnlySpan, keys ...string) string {
	out := ""
	for _, k := range keys {
		for _, kv := range s.Attributes() {
			if string(kv.Key) == k {
				out += fmt.Sprintf(" %s=%v", k, kv.Value.String())
			}
		}
	}
	if out != "" {
		out = out[1:]
	}
	return out
}
