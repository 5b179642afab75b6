// Package otelretry traces the requests a retryhttp Transport sends with
// OpenTelemetry: one span for the logical request, and one child client
// span per attempt, so that a trace shows every attempt, how long each
// took, what it ended with and how long the Transport waited before the
// next. Every attempt carries the trace context of its own span in its
// headers; all attempts of a request share one trace.
//
//	client := &http.Client{Transport: otelretry.New(nil, otelretry.Config{})}
//
// Where retryhttp's Transports are made by someone else (a policy's
// Policies.Transports, an SDK's constructor), Hook gives the attempt spans
// alone, as an option: each attempt's span is then a child of the
// caller's span.
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
// counterpart there are retryhttp.*. Waits are in milliseconds, as the
// design's retry.delay_ms is. error.type on a request's span and on its
// attempts' spans speaks one vocabulary: the outcome ("503", "reset",
// "refused", "timeout"), or circuit_open.
const (
	AttrAttempt     = attribute.Key("retry.attempt")            // the attempt's number, 1 for the first
	AttrMaxAttempts = attribute.Key("retry.max_attempts")       // WithMaxAttempts
	AttrDelay       = attribute.Key("retry.delay_ms")           // milliseconds waited before this attempt
	AttrDownstream  = attribute.Key("downstream.service")       // the Transport's name (WithName)
	AttrRetryable   = attribute.Key("error.retryable")          // the outcome was worth retrying
	AttrOutcome     = attribute.Key("retryhttp.outcome")        // "503", "reset", ...
	AttrNextDelay   = attribute.Key("retryhttp.next_delay_ms")  // milliseconds to wait before the next attempt, if retried
	AttrGiveUp      = attribute.Key("retryhttp.give_up_reason") // why a retryable outcome was not retried
	AttrAttempts    = attribute.Key("retryhttp.attempts")       // on the request's span: attempts sent
	AttrHedge       = attribute.Key("retryhttp.hedge")          // a hedged copy of the first attempt (WithHedging)
	AttrCriticality = attribute.Key("retryhttp.criticality")    // "critical" or "sheddable" (WithCriticality); absent for the default
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

// Hook returns the option that traces each attempt of a Transport made
// elsewhere (by Policies.Transports, say): a client span per attempt,
// child of the span in the request's context, whose trace context goes in
// the attempt's headers. It is what a policy's trace_attempts: true asks
// for. New gives the request its own span too; Hook does not.
func Hook(cfg Config) retryhttp.Option {
	tp, prop := cfg.TracerProvider, cfg.Propagators
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	t := &transport{tracer: tp.Tracer(scope), prop: prop, alone: true}
	return retryhttp.WithAttemptHook(t.attempt)
}

type transport struct {
	next   *retryhttp.Transport
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	alone  bool // Hook's: attempts without a request span of their own
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
	outcome  string // the last attempt's, for the request's error.type
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
	attempts, giveUp, outcome := st.attempts, st.giveUp, st.outcome
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
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err, outcome)))
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
	if st == nil && !t.alone {
		// Not sampled: propagate the request's context, make no span.
		t.prop.Inject(ctx, propagation.HeaderCarrier(a.Header))
		return ctx, nil
	}
	if st != nil {
		st.mu.Lock()
		st.attempts = max(st.attempts, a.Attempt)
		st.mu.Unlock()
	}
	attrs := append(requestAttrs(a.Request),
		AttrAttempt.Int(a.Attempt), AttrMaxAttempts.Int(a.MaxAttempts), AttrDownstream.String(a.Name))
	if a.Hedge {
		attrs = append(attrs, AttrHedge.Bool(true))
	}
	if a.Criticality != "" {
		attrs = append(attrs, AttrCriticality.String(string(a.Criticality)))
	}
	if a.Attempt > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(a.Attempt-1), AttrDelay.Float64(ms(a.Delay)))
	}
	ctx, span := t.tracer.Start(ctx, method(a.Request),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	t.prop.Inject(ctx, propagation.HeaderCarrier(a.Header))
	if !span.IsRecording() {
		span.End() // not sampled (Hook's): the context is propagated
		return ctx, nil
	}
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
			span.SetAttributes(AttrNextDelay.Float64(ms(e.NextDelay)))
		}
		if e.GiveUp != "" {
			span.SetAttributes(AttrGiveUp.String(string(e.GiveUp)))
		}
		if st != nil {
			st.mu.Lock()
			if e.GiveUp != "" {
				st.giveUp = e.GiveUp
			}
			if e.Outcome != "" && !a.Hedge {
				st.outcome = e.Outcome
			}
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

// errorType is the request's error.type, in the attempts' vocabulary: the
// last attempt's outcome ("refused", "reset", "timeout"), circuit_open
// when FailFast sent nothing, and for an error no attempt ended with, its
// class.
func errorType(err error, lastOutcome string) string {
	switch {
	case errors.Is(err, retryhttp.ErrCircuitOpen):
		return "circuit_open"
	case lastOutcome != "" && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return lastOutcome
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, retryhttp.ErrAttemptTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case lastOutcome != "":
		return lastOutcome
	}
	return "error"
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
