// Package retryhttp provides an [http.RoundTripper] that retries failed
// requests safely: only requests that may be repeated, only outcomes worth
// repeating, after jittered exponential waits that Retry-After can stretch
// and the context deadline cuts short, within a per-host retry budget and
// behind a per-host retry breaker.
//
// Set it as the Transport of an [http.Client], or wrap the transport of a
// third-party SDK with it:
//
//	client := &http.Client{Transport: retryhttp.New(nil)}
//
// # What is retried
//
// A request is retried when its method is idempotent (GET, HEAD, OPTIONS,
// TRACE, PUT, DELETE) or it carries an Idempotency-Key or X-Idempotency-Key
// header, which [WithIdempotencyKeys] can add; and any request that the
// server provably did not process: its connection could not be established,
// or HTTP/2 refused its stream (REFUSED_STREAM) or left it beyond a GOAWAY.
// The outcomes retried are 408, 429, the 5xx other than 501, 505, 506, 508,
// 510 and 511, and transport errors other than certificate and handshake
// refusals. A request body is replayed from GetBody, or from a copy of up to
// [WithBodyBufferLimit] bytes kept while the first attempt sends it.
// [WithRetryIf] refines which outcomes are worth retrying, never which
// requests may be repeated.
//
// # Why a retry is not made
//
// Each request that failed in a way worth retrying and was not retried has
// one [GiveUpReason], checked in this order: unsafe_method, body, attempts,
// retry_after, deadline, max_elapsed, body (GetBody failed), budget; and,
// for a retry the breaker held, breaker or circuit_open. RoundTrip then
// returns the last response, or an [*Error] if there is none.
//
// # Policy per dependency and per request
//
// A [Policy] is a retry policy written as JSON data; [LoadPolicies] reads a
// file of them keyed by dependency and makes one named Transport each.
// [WithRequestOptions] and [NoRetry] change one request's policy through
// its context.
//
// # Overload
//
// A [Budget] caps retries per host at a share of first attempts. The
// retry breaker ([WithRetryBreaker], on by default) holds the retries to a
// host that keeps failing, probes it with one of them at a time, and
// releases them, paced, when it answers: a short outage is bridged, a long
// one is shed within each retry's own backoff schedule.
//
// # Observability
//
// [Metrics] is a Prometheus collector; [WithLogger] logs each retry and
// give-up; [WithOnRetry] is a hook before each wait. An attempt's outcome
// ("503", "reset") and a give-up's reason use one vocabulary in all three.
//
// # Nested Transports
//
// When one Transport wraps another (an SDK's client that already uses
// retryhttp, wrapped again by the user), only the outermost retries; the
// inner ones pass each attempt through once. New looks at its base once:
// a Transport as base is called directly; below a plain [*http.Transport]
// there can be none; any other base may hide one, so each attempt sent to
// it carries a mark in its context, which costs the first attempt two
// allocations (a context and a shallow copy of the request). Give a
// middleware of your own an Unwrap() http.RoundTripper method to spare
// them.
//
// The package retrytest has helpers for testing code that uses it: a
// scripted flaky server, fault injectors and a scripted RoundTripper.
package retryhttp
