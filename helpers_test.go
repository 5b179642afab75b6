package retryhttp

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// The package's tests make their responses here: respond, reply and
// withBody, so that a response that a base returns says only what
// matters to its test; and a base that fails until it is switched up.

// respond is a response of status code, with no body.
func respond(code int) *http.Response { return reply(nil, code, nil) }

// reply is a response of status code to r, with header h (none if nil)
// and no body.
func reply(r *http.Request, code int, h http.Header) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Header: h, Request: r}
}

// withBody is resp with body, of the length given (-1: unknown).
func withBody(resp *http.Response, body io.ReadCloser, length int64) *http.Response {
	resp.Body, resp.ContentLength = body, length
	return resp
}

// failing is the tests' switchable failing base. While down (as newFailing
// makes it) it fails every attempt: with fail's answer if set, else a 503
// with header (a copy of it, each time); up, it answers 200. Each
// attempt takes latency first, if set, and is counted.
type failing struct {
	down     atomic.Bool
	attempts atomic.Int64
	latency  time.Duration
	header   http.Header
	fail     func(*http.Request) (*http.Response, error)
}

func newFailing() *failing {
	f := new(failing)
	f.down.Store(true)
	return f
}

func (f *failing) RoundTrip(r *http.Request) (*http.Response, error) {
	f.attempts.Add(1)
	time.Sleep(f.latency)
	switch {
	case !f.down.Load():
		return reply(r, 200, nil), nil
	case f.fail != nil:
		return f.fail(r)
	}
	return reply(r, 503, f.header.Clone()), nil
}
