// Package otelretry traces the requests a retryhttp Transport sends with
// OpenTelemetry: one span for the logical request, and one child client
// span per attempt, so that a trace shows every attempt, how long each
// took, what it ended with and how long the Transport waited before the
// next. Every attempt carries the trace context of its own span in its
// headers; all attempts of a request share one trace.
//
//	client := &http.Client{Transport: otelretry.New(nil, otelretry.Config{})}
//
// It is a module of its own, so that retryhttp never requires
// OpenTelemetry. It is built on retryhttp.WithAttemptHook.
//
// Why a span per attempt rather than events on one span: an attempt has a
// duration, a status and an error of its own, and the HTTP client
// semantic conventions make each resend a client span of its own
// (http.request.resend_count); a span per attempt shows in a waterfall
// where the time went, which events cannot.
package otelretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// The retry attributes, beside the HTTP semantic conventions. The names
// of the design's retry attributes come first (retry.*, downstream.*,
// error.retryable: the ones a team's trace queries use); those with no
// counterpart there are retryhttp.*.
const (
	AttrAttempt     = attribute.Key("retry.attempt")            // the attempt's number, 1 for the first
	AttrMaxAttempts = attribute.Key("retry.max_attempts")       // WithMaxAttempts
	AttrDelay       = attribute.Key("retry.delay_ms")           // milliseconds waited before this attempt
	AttrDownstream  = attribute.Key("downstream.service")       // the Transport's name (WithName)
	AttrRetryable   = attribute.Key("error.retryable")          // the outcome was worth retrying
	AttrOutcome     = attribute.Key("retryhttp.outcome")        // "503", "reset", ...
	AttrNextDelay   = attribute.Key("retryhttp.next_delay")     // seconds to wait before the next attempt, if retried
	AttrGiveUp      = attribute.Key("retryhttp.give_up_reason") // why a retryable outcome was not retried
	AttrAttempts    = attribute.Key("retryhttp.attempts")       // on the request's span: attempts sent
	AttrHedge       = attribute.Key("retryhttp.hedge")          // a hedged copy of the first attempt (WithHedging)
	// AttrNetHTTPResends: the times net/http itself sent the attempt again,
	// below retryhttp (a stale keep-alive connection, an HTTP/2 stream
	// refused or beyond a GOAWAY), seen as connections got by the attempt
	// beyond the first; set when not zero.
	AttrNetHTTPResends = attribute.Key("retryhttp.net_http_resends")
)

// Config says where spans go. A zero Config uses OpenTelemetry's global
// TracerProvider and TextMapPropagator.
type Config struct {
	TracerProvider trace.TracerProvider
	Propagators    propagation.TextMapPropagator
}

const scope = "github.com/retryhttp/retryhttp/otelretry"

// New returns a RoundTripper that is retryhttp.New(base, opts...) traced:
// a span for each request, a child span for each attempt.
func New(base http.RoundTripper, cfg Config, opts ...retryhttp.Option) http.RoundTripper {
	tp, prop := cfg.TracerProvider, cfg.Propagators
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	t := &transport{tracer: tp.Tracer(scope), prop: prop}
	t.next = retryhttp.New(base, append(opts, retryhttp.WithAttemptHook(t.attempt))...)
	return t
}

type transport struct {
	next   *retryhttp.Transport
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// Unwrap returns the retryhttp Transport.
func (t *transport) Unwrap() http.RoundTripper { return t.next }

// CloseIdleConnections closes the idle connections of the base.
func (t *transport) CloseIdleConnections() { t.next.CloseIdleConnections() }

type stateKey struct{}

// state is what the attempts of one request tell its span. Hedged copies
// report at the same time, hence the lock.
type state struct {
	mu       sync.Mutex
	attempts int
	giveUp   retryhttp.GiveUpReason
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := t.tracer.Start(req.Context(), "retryhttp "+method(req),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(requestAttrs(req)...))
	if !span.IsRecording() {
		// Not sampled: the attempts still carry the trace context, at no
		// further cost.
		span.End()
		return t.next.RoundTrip(req.WithContext(ctx))
	}
	st := &state{}
	ctx = context.WithValue(ctx, stateKey{}, st)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	st.mu.Lock()
	attempts, giveUp := st.attempts, st.giveUp
	st.mu.Unlock()
	span.SetAttributes(AttrAttempts.Int(attempts))
	var re *retryhttp.Error
	if errors.As(err, &re) && re.Reason != "" {
		giveUp = re.Reason
	}
	if giveUp != "" {
		span.SetAttributes(AttrGiveUp.String(string(giveUp)))
	}
	switch {
	case err != nil:
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	default:
		span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
		if resp.StatusCode >= 400 {
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
	return resp, err
}

// attempt is the retryhttp attempt hook: a client span per attempt, whose
// trace context goes in the attempt's headers.
func (t *transport) attempt(ctx context.Context, a retryhttp.AttemptStart) (context.Context, func(retryhttp.AttemptEnd)) {
	st, _ := ctx.Value(stateKey{}).(*state)
	if st == nil {
		// Not sampled: propagate the request's context, make no span.
		t.prop.Inject(ctx, propagation.HeaderCarrier(a.Header))
		return ctx, nil
	}
	st.mu.Lock()
	st.attempts = max(st.attempts, a.Attempt)
	st.mu.Unlock()
	attrs := append(requestAttrs(a.Request),
		AttrAttempt.Int(a.Attempt), AttrMaxAttempts.Int(a.MaxAttempts), AttrDownstream.String(a.Name))
	if a.Hedge {
		attrs = append(attrs, AttrHedge.Bool(true))
	}
	if a.Attempt > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(a.Attempt-1), AttrDelay.Float64(float64(a.Delay)/float64(time.Millisecond)))
	}
	ctx, span := t.tracer.Start(ctx, method(a.Request),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	t.prop.Inject(ctx, propagation.HeaderCarrier(a.Header))
	// net/http gets a connection for each time it sends the request: more
	// than one is a resend of its own. Composed with any trace already set.
	conns := new(atomic.Int32)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { conns.Add(1) },
	})
	return ctx, func(e retryhttp.AttemptEnd) {
		span.SetAttributes(AttrOutcome.String(e.Outcome), AttrRetryable.Bool(e.Retryable))
		if n := conns.Load(); n > 1 {
			span.SetAttributes(AttrNetHTTPResends.Int(int(n - 1)))
		}
		if e.Response != nil {
			span.SetAttributes(semconv.HTTPResponseStatusCode(e.Response.StatusCode))
		}
		if e.Err != nil || (e.Response != nil && e.Response.StatusCode >= 400) {
			span.SetAttributes(semconv.ErrorTypeKey.String(e.Outcome))
			span.SetStatus(codes.Error, "")
		}
		if e.Retried {
			span.SetAttributes(AttrNextDelay.Float64(e.NextDelay.Seconds()))
		}
		if e.GiveUp != "" {
			span.SetAttributes(AttrGiveUp.String(string(e.GiveUp)))
			st.mu.Lock()
			st.giveUp = e.GiveUp
			st.mu.Unlock()
		}
		// The hook of a retried attempt is called after the retry's wait:
		// the span ends when the attempt did.
		span.End(trace.WithTimestamp(e.End))
	}
}

func method(r *http.Request) string {
	if r.Method == "" {
		return http.MethodGet
	}
	return r.Method
}

// requestAttrs are the HTTP client attributes of a request. url.full
// leaves out the query and any user information, which may hold secrets.
func requestAttrs(r *http.Request) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method(r))}
	if r.URL != nil {
		u := *r.URL
		u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
		attrs = append(attrs, semconv.URLFull(u.String()), semconv.ServerAddress(r.URL.Hostname()))
		if p, err := strconv.Atoi(r.URL.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	}
	return attrs
}

// errorType is a low-cardinality kind for an error: the give-up's cause
// class where retryhttp said it, else the error's type.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, retryhttp.ErrCircuitOpen):
		return "circuit_open"
	case errors.Is(err, retryhttp.ErrAttemptTimeout):
		return "timeout"
	}
	return "error"
}
