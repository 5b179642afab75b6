// Package conformance holds retryhttp's conformance suite: the library's
// promises checked against real software, go-httpbin behind toxiproxy,
// both in-process, over HTTP/1.1 and HTTP/2 with TLS. It is a module of its
// own so that the library's go.mod stays as it is. `make conformance` runs
// it and fails if the tables it writes (results.md, results-http2.md and
// those of docs/conformance.md) differ from the run; `make
// conformance-update` (or go test ./conformance -update) rewrites them.
package conformance
