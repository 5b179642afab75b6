// Package retrytest provides helpers for testing code that retries HTTP
// requests, shaped like [net/http/httptest] and [testing/iotest]:
//
//   - [Server], a scripted flaky server that records every attempt it
//     receives (method, headers, a hash of the body), with [NewServer],
//     [NewTLSServer] and [NewUnstartedServer];
//   - [Fault] injectors for the failures a network really produces (a
//     reset, a hang, a body cut short, a slow body) and [RefusedAddr] for a
//     connection that is refused;
//   - [ScriptTransport], an in-memory scripted RoundTripper, and
//     [RoundTripperFunc];
//   - checkers that return an error, such as [CheckSameBody] and
//     [CheckSameHeader].
//
// It is used by retryhttp's own tests and is meant for its users'.
package retrytest
