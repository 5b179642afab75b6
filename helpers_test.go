package retryhttp

import (
	"io"
	"net/http"
)

// The package's tests make their responses here: respond, reply and
// withBody, so that a response that a base returns says only what
// matters to its test.

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
