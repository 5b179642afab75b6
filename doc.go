// Package retryhttp provides an [http.RoundTripper] that retries failed
// requests safely: only requests that may be repeated, only outcomes worth
// repeating, after jittered exponential waits that Retry-After can stretch
// and the context deadline cuts short, within a per-host retry budget and
// behind a per-host retry breaker. With the defaults (base 200ms, max 10s)
// the first retry waits a random 0 to 400ms, the second 0 to 800ms, the
// third 0 to 1.6s.
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
// retry_after, deadline, max_elapsed, body (GetBody failed), budget,
// circuit_open; and, for a retry the breaker held, breaker, max_elapsed or
// budget as it leaves the hold. RoundTrip then
// returns the last response, or an [*Error] if there is none. A pacer
// (off by default) refuses an attempt before it is sent: throttled, rate,
// quota or limit, a first attempt with an [*Error] and no attempt made.
//
// # Policy per dependency and per request
//
// A [Policy] is a retry policy written as data, in the template teams
// write per dependency (dependency, semantic_safety, time_budget, retry,
// budget, fallback, observability, owner); [LoadPolicies] reads JSON
// files of them (the yamlpolicy module, YAML), [Policies.Transports] makes
// one named Transport per dependency, and a dependency's operations, each
// with a match such as "GET /parties/*", carry their own retry settings.
// [WithRequestOptions] and [NoRetry] change one request's policy through
// its context.
//
// # Admission
//
// Per host and per Transport, admission is a fixed list of controllers,
// asked in order whether each attempt goes now, waits, is held or is
// refused, and told how each attempt ended. The budget ([Budget],
// [WithBudget]) charges every retry that goes, and lets retries add at
// most a share (10%) of the first attempts, or a small floor while the
// host is not failing. The breaker ([WithRetryBreaker]) opens on a
// failing host: its retries are held, one going as a probe, and an answer
// releases them as a slow start, slowed to a share of the host's own
// answers if it turns them away. In an overload, a retry the budget
// refuses gives up at once with its last response; in an outage, retries
// wait for the host, within their own limits. First attempts are never
// held. docs/overload.md gives the rules in full, what they promise, and
// the simulator that checks them.
//
// # Pacing
//
// Four more controllers, off by default, decide when an attempt is sent:
// the throttle ([WithThrottle]), the static rate ([WithRateLimit]), quota
// pacing ([WithQuotaPacing]) and the concurrency limit
// ([WithConcurrencyLimit]), asked in that order. An attempt may wait for
// them within its deadline; one they refuse sends nothing, and the
// request ends at once with an [*Error] whose Reason names the pacer (or,
// for a retry, gives up with its last response).
//
// # Observability
//
// [Metrics] is a Prometheus collector; [WithLogger] logs each retry and
// give-up; [WithAttemptHook] is the one hook, called as each attempt
// starts and ends. An attempt's outcome ("503", "reset") and a give-up's
// reason use one vocabulary in all three.
//
// # Nested Transports
//
// When one Transport wraps another (an SDK's client that already uses
// retryhttp, wrapped again by the user), only the outermost retries; the
// inner ones pass each attempt through once. New looks at its base once:
// a Transport as base is called directly; below a plain [*http.Transport]
// there can be none; any other base may hide one, so each attempt sent to
// it carries a mark in its context, which costs each attempt one
// allocation (a shallow copy of the request, its context in the same
// allocation). Give a middleware of your own an Unwrap() http.RoundTripper
// method to spare it.
//
// The package retrytest has helpers for testing code that uses it: a
// scripted flaky server, fault injectors and a scripted RoundTripper.
package retryhttp
