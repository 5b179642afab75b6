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
// (off by default) refuses an attempt before it is sent: throttled, quota
// or limit, a first attempt with an [*Error] and no attempt made.
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
// asked in order whether each attempt goes now, is held or is refused,
// and told the fresh outcome of each attempt. They share one health
// score: each attempt that fails in a way worth retrying (a refused
// connection included) adds 1, each answer takes 2 off (down to 0). The
// host is failing once the score has reached 4 over at least 10ms and its
// latest word was a failure. It is in an outage (it serves no one) once,
// besides, it has not answered for 4 times its usual gap between answers,
// and at least 100ms (or never has): a host that serves some and refuses
// the rest is overloaded, not out. A failure of an attempt that started
// before an attempt the host has answered since is stale, and changes
// nothing.
//
// The budget ([Budget], [WithBudget]) counts first attempts and charges
// every retry that goes, whichever way it leaves, and every hedge:
//
//   - a retry fits the share (10% of first attempts over 10 s) or, while
//     the host is not failing, the floor (10 a second, counted over 3 s).
//   - in an overload, a retry that fits neither gives up at once, reason
//     budget, with its last response.
//   - in an outage, retries are held instead, uncharged while held, if
//     anything can pay for them when the host is back: the share's room,
//     or a loan. A recovery from an outage may lend: the retries it
//     releases beyond the share are owed, 10 first attempts each (1/ratio),
//     and until they are repaid no recovery lends again.
//
// The breaker ([WithRetryBreaker], on by default):
//
//   - opens once the score reaches Threshold (10) over 10ms; any fresh
//     answer closes it. While open, or while the host is in an outage,
//     retries are held (FailFast: refused, reason circuit_open, first
//     attempts too), unless one goes as the probe.
//   - one probe at a time per host: the oldest held retry whose wait has
//     ended, at ProbeBackoff after the last failure to the host (a client
//     whose first attempts keep coming needs none; sooner the more retries
//     are held), charged to the budget (the floor too, with 4 or more
//     held); one unanswered after ProbeTimeout counts as failed.
//   - an answer releases the held retries as a slow start: a few at once,
//     one more for each answer and two for each answer to a retry (what
//     goes doubles each round trip), halting at the first failure until
//     the next answer, at that answer's pace after; each goes by its paced
//     turn (as long after the answer as it was due after the first of
//     them) at the latest, so that a fleet's backlogs do not come back
//     together.
//   - a held retry ends at its limit: its backoff schedule from its first
//     failure (2.8s with the defaults; for a crowd whose first attempts
//     failed within 10ms of each other, a random 80% to 100% of it, so
//     that they come back apart; MaxHold if set), never before its
//     Retry-After, no later than the context deadline or [WithMaxElapsed].
//     There it gives up, reason breaker (max_elapsed past WithMaxElapsed),
//     if a retry or probe has failed since the host last answered;
//     otherwise (failed first attempts say nothing of retries) it goes.
//     Nothing keeps it past its limit, not a probe in flight.
//
// Every give-up returns the last response when there is one. First
// attempts are never held. Hedges ([WithHedging]) do not go while the
// breaker is open or retries are held. Only retries that are sent are
// logged as "retrying", counted in retryhttp_retries_total and started
// through [WithAttemptHook]: attempts_total is requests_total plus
// retries_total plus hedges_total, less the requests refused before their
// first attempt (FailFast, the pacers below). A
// waiting retry keeps its last response, within 4 MiB per Transport.
//
// What this promises: in an overload, retries add at most the budget's
// share to what a host receives, for a busy client, a quiet one or a
// fleet; in an outage, they wait for the host instead of giving up, and
// beyond the share a host receives at most ratio × its first attempts
// plus one recovery's held retries; every wait is bounded by the
// request's own limits; and once a host has been seen answering again,
// the breaker refuses and gives up on nothing whose limit has not
// passed, and the budget refuses only once it is spent. A simulator
// (sim_test.go) checks this, and the other invariants, over random
// option sets and fault scripts.
//
// # Pacing
//
// Four more controllers, off by default, decide when an attempt is sent,
// once the budget and the breaker have let it be: the pacers. Each keeps
// its state per host, and each refusal sends nothing and ends the request
// at once (in microseconds) with an [*Error] whose Reason names the pacer
// and whose Attempts is 0, or, for a retry, gives up with its last
// response. They are asked in this order, each only if the one before let
// the attempt go:
//
//  1. the throttle ([WithThrottle]), first attempts only: it refuses a
//     share of them at random, reason throttled, so that the host
//     receives about ratio × what it accepts. It goes first because its
//     refusal costs no wait, and a request it refuses must take no token,
//     quota or slot.
//  2. the static rate ([WithRateLimit]): the attempt waits for its token;
//     one whose token would come past its deadline is refused, reason
//     quota, and takes none.
//  3. quota pacing ([WithQuotaPacing]): while a quota the host reported
//     is predicted spent, the attempt waits for its reset (plus up to a
//     tenth of it, at most 1 s), then asks again; one whose wait would
//     pass its deadline or maxWait is refused, reason quota.
//  4. the concurrency limit ([WithConcurrencyLimit]), last: a slot is
//     held only by an attempt that goes at once, not while it waits for a
//     token or a quota. Over the limit, it waits in line (max at most),
//     within its deadline; otherwise it is refused, reason limit.
//
// The waits of a retry come after its backoff, and add to it. Every
// pacer is told how every attempt it let go ended: an attempt that the
// host turned away (429, 502, 503, 504, a timeout, a connection error) is
// a refusal for the throttle and a drop for the limit; the answers'
// RateLimit fields are the quota's. With the rate, quota or limit on, no
// request is hedged (a copy would take no turn, quota or slot). A
// Transport that another retryhttp Transport wraps sends each of the
// outer one's attempts once, without its own pacers: give them to the
// outer one. docs/overload.md gives the measures, and why none is on by
// default.
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
