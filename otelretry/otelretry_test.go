package otelretry

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retrytest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func steps(codes ...int) []retrytest.Step {
	s := make([]retrytest.Step, len(codes))
	for i, c := range codes {
		s[i] = retrytest.Step{Reply: retrytest.Status(c)}
	}
	return s
}

// traced sends one request through a traced Transport over base and
// returns the spans, ended, in order.
func traced(t *testing.T, base http.RoundTripper, method string, opts ...retryhttp.Option) ([]sdktrace.ReadOnlySpan, *http.Response, error) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rt := New(base, Config{TracerProvider: tp, Propagators: propagation.TraceContext{}},
		append([]retryhttp.Option{retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond))}, opts...)...)
	req, _ := http.NewRequest(method, "http://api.test:8080/v1/rates?token=secret", strings.NewReader("x"))
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return rec.Ended(), resp, err
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// checkTree checks that the last span is the request's, and the others its
// children, one per attempt, in order, in one trace.
func checkTree(t *testing.T, spans []sdktrace.ReadOnlySpan, attempts int) (req sdktrace.ReadOnlySpan, tries []sdktrace.ReadOnlySpan) {
	t.Helper()
	if len(spans) != attempts+1 {
		t.Fatalf("%d spans, want %d (the request and %d attempts)", len(spans), attempts+1, attempts)
	}
	req, tries = spans[len(spans)-1], spans[:len(spans)-1]
	if req.Name() != "retryhttp GET" && req.Name() != "retryhttp POST" || req.SpanKind() != trace.SpanKindInternal {
		t.Errorf("request span %q, kind %v", req.Name(), req.SpanKind())
	}
	for i, s := range tries {
		a := attrs(s)
		if s.Parent().SpanID() != req.SpanContext().SpanID() || s.SpanContext().TraceID() != req.SpanContext().TraceID() {
			t.Errorf("attempt %d: not a child of the request's span in its trace", i+1)
		}
		if s.SpanKind() != trace.SpanKindClient || a[AttrAttempt].AsInt64() != int64(i+1) || a[AttrMaxAttempts].AsInt64() != 4 {
			t.Errorf("attempt %d: kind %v, attributes %v", i+1, s.SpanKind(), a)
		}
		resend, ok := a["http.request.resend_count"]
		if (i == 0) == ok || (ok && resend.AsInt64() != int64(i)) {
			t.Errorf("attempt %d: http.request.resend_count %v, %v", i+1, resend, ok)
		}
		if u := a["url.full"].AsString(); u != "http://api.test:8080/v1/rates" {
			t.Errorf("attempt %d: url.full %q, want it without the query", i+1, u)
		}
	}
	return req, tries
}

func TestSpansSuccessAtOnce(t *testing.T) {
	spans, _, err := traced(t, retrytest.NewScriptTransport(), "GET")
	if err != nil {
		t.Fatal(err)
	}
	req, tries := checkTree(t, spans, 1)
	if a := attrs(tries[0]); a["http.response.status_code"].AsInt64() != 200 || a[AttrOutcome].AsString() != "200" || a[AttrRetryable].AsBool() {
		t.Errorf("attempt: %v", a)
	}
	if a := attrs(req); a[AttrAttempts].AsInt64() != 1 || a["http.response.status_code"].AsInt64() != 200 {
		t.Errorf("request: %v", a)
	}
	if _, ok := attrs(tries[0])[AttrCriticality]; ok {
		t.Errorf("a default request's attempt carries a criticality")
	}
}

// An attempt's span carries its request's criticality.
func TestSpansCarryCriticality(t *testing.T) {
	spans, _, err := traced(t, retrytest.NewScriptTransport(), "GET", retryhttp.WithCriticality(retryhttp.Sheddable))
	if err != nil {
		t.Fatal(err)
	}
	_, tries := checkTree(t, spans, 1)
	if got := attrs(tries[0])[AttrCriticality].AsString(); got != "sheddable" {
		t.Errorf("criticality %q, want sheddable", got)
	}
}

func TestSpansRetriedTwice(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503)...)
	spans, resp, err := traced(t, base, "GET")
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	req, tries := checkTree(t, spans, 3)
	for i, s := range tries {
		a := attrs(s)
		want := map[int]string{0: "503", 1: "503", 2: "200"}[i]
		if a[AttrOutcome].AsString() != want || (i < 2) != a[AttrRetryable].AsBool() {
			t.Errorf("attempt %d: outcome %v, retryable %v", i+1, a[AttrOutcome], a[AttrRetryable])
		}
		if _, ok := a[AttrNextDelay]; (i < 2) != ok {
			t.Errorf("attempt %d: next_delay present %v", i+1, ok)
		}
		if _, ok := a[AttrDelay]; (i > 0) != ok {
			t.Errorf("attempt %d: delay present %v", i+1, ok)
		}
	}
	if attrs(req)[AttrAttempts].AsInt64() != 3 {
		t.Errorf("request: %v", attrs(req))
	}
	// Every attempt carried its own span's trace context.
	for i, a := range base.Attempts() {
		tp := a.Header.Get("Traceparent")
		if !strings.Contains(tp, tries[i].SpanContext().TraceID().String()) || !strings.Contains(tp, tries[i].SpanContext().SpanID().String()) {
			t.Errorf("attempt %d: traceparent %q, want its own span's", i+1, tp)
		}
	}
}

func TestSpansGiveUp(t *testing.T) {
	for _, tt := range []struct {
		name     string
		method   string
		base     http.RoundTripper
		opts     []retryhttp.Option
		attempts int
		reason   string
	}{
		{"attempts", "GET", retrytest.NewScriptTransport(steps(503, 503, 503, 503)...), nil, 4, "attempts"},
		{"unsafe_method", "POST", retrytest.NewScriptTransport(steps(503)...), nil, 1, "unsafe_method"},
		{"retry_after", "GET", retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.RetryAfter(503, "3600")}), nil, 1, "retry_after"},
		{"budget", "GET", retrytest.NewScriptTransport(steps(503)...),
			[]retryhttp.Option{retryhttp.WithBudget(retryhttp.NewBudget(0, 0))}, 1, "budget"},
		{"max_elapsed", "GET", retrytest.NewScriptTransport(steps(503)...),
			[]retryhttp.Option{retryhttp.WithMaxElapsed(time.Nanosecond)}, 1, "max_elapsed"},
		{"error, attempts", "GET", retrytest.NewScriptTransport(
			retrytest.Step{Err: io.ErrUnexpectedEOF}, retrytest.Step{Err: io.ErrUnexpectedEOF},
			retrytest.Step{Err: io.ErrUnexpectedEOF}, retrytest.Step{Err: io.ErrUnexpectedEOF}), nil, 4, "attempts"},
	} {
		spans, _, _ := traced(t, tt.base, tt.method, tt.opts...)
		req, tries := checkTree(t, spans, tt.attempts)
		if got := attrs(req)[AttrGiveUp].AsString(); got != tt.reason {
			t.Errorf("%s: request give_up_reason %q, want %q", tt.name, got, tt.reason)
		}
		if got := attrs(tries[len(tries)-1])[AttrGiveUp].AsString(); got != tt.reason {
			t.Errorf("%s: last attempt give_up_reason %q, want %q", tt.name, got, tt.reason)
		}
		if req.Status().Code.String() != "Error" {
			t.Errorf("%s: request span status %v, want Error", tt.name, req.Status())
		}
	}
	// The caller's deadline, which would pass during the wait.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rt := New(retrytest.NewScriptTransport(steps(503)...), Config{TracerProvider: tp},
		retryhttp.WithBackoff(retryhttp.Constant(time.Hour)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
	resp, _ := rt.RoundTrip(req)
	resp.Body.Close()
	if got := attrs(rec.Ended()[1])[AttrGiveUp].AsString(); got != "deadline" {
		t.Errorf("deadline: give_up_reason %q", got)
	}
}

// Not sampled: no span is recorded, yet every attempt carries the trace
// context, flagged not sampled.
func TestNotSampled(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.NeverSample()))
	base := retrytest.NewScriptTransport(steps(503)...)
	rt := New(base, Config{TracerProvider: tp, Propagators: propagation.TraceContext{}},
		retryhttp.WithBackoff(retryhttp.Constant(0)))
	req, _ := http.NewRequest("GET", "http://api.test/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(rec.Ended()) != 0 {
		t.Errorf("%d spans recorded, want none", len(rec.Ended()))
	}
	for i, a := range base.Attempts() {
		if tp := a.Header.Get("Traceparent"); !strings.HasSuffix(tp, "-00") {
			t.Errorf("attempt %d: traceparent %q, want one flagged not sampled", i+1, tp)
		}
	}
}

// A body that cannot be sent again, and a circuit that is open (FailFast:
// no attempt at all), are told on the request's span too.
func TestSpansGiveUpBodyAndCircuit(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rt := New(retrytest.NewScriptTransport(steps(503)...), Config{TracerProvider: tp},
		retryhttp.WithBodyBufferLimit(0))
	req, _ := http.NewRequest("PUT", "http://api.test/", struct{ io.Reader }{strings.NewReader("x")})
	resp, _ := rt.RoundTrip(req)
	resp.Body.Close()
	if got := attrs(rec.Ended()[1])[AttrGiveUp].AsString(); got != "body" {
		t.Errorf("body: give_up_reason %q", got)
	}

	rec = tracetest.NewSpanRecorder()
	tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rt = New(retrytest.NewScriptTransport(steps(503, 503, 503)...), Config{TracerProvider: tp},
		retryhttp.WithMaxAttempts(1), retryhttp.WithRetryBreaker(retryhttp.BreakerConfig{FailFast: true, Threshold: 3}))
	for range 4 {
		time.Sleep(5 * time.Millisecond) // failures over time open the breaker, not in one instant
		req, _ := http.NewRequest("GET", "http://api.test/", nil)
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	spans := rec.Ended()
	last := spans[len(spans)-1]
	if got := attrs(last)[AttrGiveUp].AsString(); got != "circuit_open" || attrs(last)[AttrAttempts].AsInt64() != 0 {
		t.Errorf("circuit_open: request span %v", attrs(last))
	}
}

// A hedged request: the trace shows the first attempt and its hedge, both
// children of the request's span, the hedge marked.
func TestSpansHedged(t *testing.T) {
	slow := retrytest.Step{Reply: retrytest.Reply{Delay: 300 * time.Millisecond, Body: "slow"}}
	fast := retrytest.Step{Reply: retrytest.Reply{Delay: time.Millisecond, Body: "fast"}}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rt := New(retrytest.NewScriptTransport(slow, fast), Config{TracerProvider: tp},
		retryhttp.WithHedging(retryhttp.HedgeConfig{Delay: 20 * time.Millisecond}))
	req, _ := http.NewRequest("GET", "http://api.test/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	resp.Body.Close()
	for end := time.Now().Add(2 * time.Second); len(rec.Ended()) < 3 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond) // the cancelled copy ends its span in the background
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want the request's, the attempt's and the hedge's", len(spans))
	}
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "retryhttp GET" {
			root = s
		}
	}
	hedges := 0
	for _, s := range spans {
		if s == root {
			continue
		}
		if s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("span %q is not a child of the request's", s.Name())
		}
		if attrs(s)[AttrHedge].AsBool() {
			hedges++
		}
	}
	if hedges != 1 {
		t.Errorf("%d spans marked as hedges, want 1", hedges)
	}
}

// TestNetHTTPResendsCounted: a server that drops a keep-alive connection
// after reading the next request on it makes net/http resend that request
// on a new connection, itself, below retryhttp. The attempt's span says so.
func TestNetHTTPResendsCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		for i := 0; i < 2; i++ { // the first connection, then the resend's
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			if _, err := http.ReadRequest(br); err == nil {
				io.WriteString(c, ok)
			}
			if i == 0 {
				http.ReadRequest(br) // the next request, which is dropped
			} else {
				io.Copy(io.Discard, br)
			}
			c.Close()
		}
	}()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	base := &http.Transport{}
	rt := New(base, Config{TracerProvider: tp, Propagators: propagation.TraceContext{}})
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	base.CloseIdleConnections()
	<-done
	spans := rec.Ended() // attempt, request, attempt, request
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	if v, ok := attrs(spans[0])[AttrNetHTTPResends]; ok {
		t.Errorf("first request: %s = %v, want none", AttrNetHTTPResends, v.AsInt64())
	}
	if v := attrs(spans[2])[AttrNetHTTPResends]; v.AsInt64() != 1 {
		t.Errorf("second request: %s = %v, want 1", AttrNetHTTPResends, v.AsInt64())
	}
	if v := attrs(spans[3])[AttrAttempts]; v.AsInt64() != 1 {
		t.Errorf("second request: %s = %v, want 1: the resend was net/http's", AttrAttempts, v.AsInt64())
	}
}

// Every attempt's span carries the design's names: retry.attempt,
// retry.max_attempts, retry.delay_ms (milliseconds), downstream.service
// (the Transport's name) and error.retryable.
func TestSpansDesignAttributes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rt := New(retrytest.NewScriptTransport(steps(503)...), Config{TracerProvider: tp},
		retryhttp.WithName("users"), retryhttp.WithBackoff(retryhttp.Constant(250*time.Millisecond)))
	req, _ := http.NewRequest("GET", "http://api.test/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	second := attrs(rec.Ended()[1])
	if second["retry.attempt"].AsInt64() != 2 || second["retry.max_attempts"].AsInt64() != 4 ||
		second["retry.delay_ms"].AsFloat64() != 250 || second["downstream.service"].AsString() != "users" ||
		second["error.retryable"].AsBool() {
		t.Errorf("second attempt's span: %v", second)
	}
	if first := attrs(rec.Ended()[0]); !first["error.retryable"].AsBool() {
		t.Errorf("first attempt's span (a 503): %v", first)
	}
}

// An attempt's span ends when the attempt does, not when its retry's wait
// does (the hook hears a retried attempt's end only as the retry goes):
// the spans of the attempts do not overlap the wait between them.
func TestSpanEndsWithItsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503)...)
		spans, resp, err := traced(t, base, "GET", retryhttp.WithBackoff(retryhttp.Constant(200*time.Millisecond)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
		_, tries := checkTree(t, spans, 2)
		first, second := tries[0], tries[1]
		if d := first.EndTime().Sub(first.StartTime()); d != 0 {
			t.Errorf("the first attempt's span lasted %v; it took no time (the wait of 200ms is not its own)", d)
		}
		if gap := second.StartTime().Sub(first.EndTime()); gap != 200*time.Millisecond {
			t.Errorf("%v between the first attempt's end and the second's start, want the wait, 200ms", gap)
		}
	})
}

// The per-dependency template, as written, builds its Transports with
// nothing but what its observability section names: Metrics and Hook. Each
// attempt gets a client span, child of the caller's span.
func TestHookBuildsTheTemplate(t *testing.T) {
	f, err := os.Open("../testdata/policy-template.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := retryhttp.LoadPolicies(f)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	trs, err := ps.Transports(nil, retryhttp.WithMetrics(retryhttp.NewMetrics()),
		Hook(Config{TracerProvider: tp, Propagators: propagation.TraceContext{}}))
	if err != nil {
		t.Fatal(err)
	}
	srv := retrytest.NewServer(retrytest.Status(503))
	defer srv.Close()
	tr := trs["party-service"]
	defer tr.CloseIdleConnections()
	ctx, parent := tp.Tracer("caller").Start(context.Background(), "handler")
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/parties/1", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	parent.End()
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 2 attempts and the caller's", len(spans))
	}
	for i, s := range spans[:2] {
		a := attrs(s)
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient ||
			a[AttrAttempt].AsInt64() != int64(i+1) || a[AttrDownstream].AsString() != "party-service" {
			t.Errorf("attempt %d: parent %v, kind %v, %v", i+1, s.Parent().SpanID(), s.SpanKind(), a)
		}
	}
	if at := srv.Count(); at != 2 {
		t.Errorf("%d attempts, want 2", at)
	}
}

// A request that ends on an error says it in the words of its attempts:
// a refused connection is "refused" on both.
func TestErrorTypeAgrees(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	step := retrytest.Step{Err: refused}
	base := retrytest.NewScriptTransport(step, step, step, step)
	spans, _, err := traced(t, base, "GET")
	if err == nil {
		t.Fatal("want an error")
	}
	req, tries := checkTree(t, spans, 4)
	want := attrs(tries[3])["error.type"].AsString()
	if got := attrs(req)["error.type"].AsString(); got != want || want != "refused" {
		t.Errorf("request error.type %q, attempt %q; want both refused", got, want)
	}
}
