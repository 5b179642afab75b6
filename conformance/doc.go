// Package conformance holds retryhttp's conformance suite: the README's
// promises checked against real software, go-httpbin behind toxiproxy,
// both in-process, over HTTP/1.1 and HTTP/2 with TLS. It is a module of its
// own so that the library's go.mod stays as it is. `make conformance` runs
// it and fails if the tables the README shows (results.md,
// results-http2.md) differ from the run; `make conformance-update` (or go
// test ./conformance -update) rewrites them.
package conformance
