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
// retry_after, deadline, max_elapsed, body (GetBody failed), budget; and,
// for a retry the breaker held, breaker or circuit_open. RoundTrip then
// returns the last response, or an [*Error] if there is none.
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
// Per host and per Transport, one health score is kept: each attempt that
// fails in a way worth retrying adds 1, each answer takes 2 off (down to
// 0). A [Budget] caps retries per host at a share of first attempts, plus a
// floor. The retry breaker ([WithRetryBreaker], on by default) holds the
// retries to a host that is failing. The host is in one of three states:
//
//	          score >= 4 over 10ms (or >= Threshold at once)
//	healthy  ───────────────────────────────────────────────▶  failing
//	   ▲  ▲                                                     │   │
//	   │  └────────────── answers, until the score is < 4 ──────┘   │
//	   │                                                            │ score >= Threshold
//	   │     any answer: score 0, held retries released, paced      │ over 10ms
//	   └──────────────────────────  open  ◀─────────────────────────┘
//
// What a retry does, once the checks of "Why a retry is not made" allow
// it after its wait (backoff, stretched by Retry-After):
//
//   - healthy: it is charged to the budget (with the floor) and waits; if
//     the budget has no room, it gives up at once, reason budget, without
//     a wait and without being counted as a retry (unless the score is
//     already 4: then it is held, as below).
//   - failing: as healthy, without the floor; if the budget has no room,
//     the retry is held (as below) rather than refused.
//   - open: the retry is held, not charged. With FailFast it goes only as
//     the probe, and otherwise gives up at once, reason circuit_open.
//   - a retry that was charged and finds the breaker open when its wait
//     ends is held too.
//
// A held retry leaves the hold in one of three ways, and never before its
// own wait (Retry-After included) has ended:
//
//   - released: an answer from the host, to any attempt (a probe, a first
//     attempt, another request's retry), releases every held retry; each
//     goes as long after the answer as it was due (its wait's end, or when
//     it was held, if later) after the earliest of them, so that they come
//     back at the pace of their own schedules, but never later than halfway
//     to its limit.
//   - as the probe: one held retry at a time goes out, the oldest whose
//     wait has ended, at ProbeBackoff after the host's last failure;
//     charged to the budget unless it stands for 4 or more held retries. A
//     probe unanswered after ProbeTimeout counts as failed.
//   - at its limit: its request's backoff schedule from its first failure
//     (2.8s with the defaults; MaxHold if set), never before its
//     Retry-After, and no later than the context deadline or
//     [WithMaxElapsed]. There it gives up with its last response, reason
//     breaker, if an attempt sent to the host since it was held has
//     failed and a retry or a probe has failed since the host began
//     failing (failed first attempts alone do not show that a retry would
//     fail: requests that each fail once must not be lost). Otherwise it
//     goes as the probe itself (once no other probe is in flight), free
//     of the budget, and gives up only if that fails and its schedule is
//     spent. Past WithMaxElapsed it never goes, not even as the probe: it
//     gives up, reason max_elapsed.
//
// First attempts are never held; with FailFast they are refused
// ([ErrCircuitOpen]) while the breaker is open, except one in six and the
// probe. Hedges ([WithHedging]) are charged to the budget and none goes
// while the breaker is open or retries are held. Only retries that are
// sent are logged as "retrying", counted in retryhttp_retries_total and
// started through [WithAttemptHook]: attempts_total is requests_total plus
// retries_total plus hedges_total, less the requests FailFast refused.
// A waiting retry keeps its last response, within [DefaultHeldBodyMemory]
// per Transport.
//
// What this promises: protection costs attempts while a host is down, not
// the successes after it is back. Once a host has been seen answering
// again, no request whose limit has not passed is refused or given up on
// by the budget or the breaker. A simulator (sim_test.go) checks this,
// and the other invariants, over random option sets and fault scripts.
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
// it carries a mark in its context, which costs the first attempt two
// allocations (a context and a shallow copy of the request). Give a
// middleware of your own an Unwrap() http.RoundTripper method to spare
// them.
//
// The package retrytest has helpers for testing code that uses it: a
// scripted flaky server, fault injectors and a scripted RoundTripper.
package retryhttp
