// This file holds what is the pacers' alone in admission (admission.go):
// whether any is on, the question asked of them as a retry is about to be
// sent, what counts as the host turning an attempt away, and whether they
// hold anything. They are the throttle (throttle.go), the static rate
// limit (staticrate.go), quota pacing (quota.go) and the concurrency limit
// (limit.go), all off by default. Their order, and why, is in the package
// documentation ("Pacing").

package retryhttp

import (
	"context"
	"errors"
	"net/http"
)

// errRefused is what a request that a pacer refused before its first
// attempt ends with, in an *Error whose Reason says which pacer.
var errRefused = errors.New("retryhttp: refused before sending, to spare the host")

// pace asks the pacers whether a retry, its wait over, goes now: "" when
// it may, once every wait asked for has passed; otherwise why not, or the
// context's error if it ended during a wait.
func (g *gate) pace(t *ticket) (GiveUpReason, error) {
	v, err := g.admit(t, t.question(kindSend))
	return v.reason, err
}

// pacing fills in what the pacers are told of an attempt they let go,
// which ended at o.now with r: whether it reached the host, how long it
// took, whether the host turned it away, and what the answer said.
func (o *seen) pacing(t *ticket, r *result) {
	canceled := r.outcome == outcomeCanceled && !errors.Is(r.err, context.DeadlineExceeded)
	o.sent, o.canceled, o.rejected = !r.notSent && !canceled, canceled, rejected(r)
	o.start, o.rtt = t.start, o.now-t.start
	if r.resp != nil {
		o.header, o.status, o.wall = r.resp.Header, r.resp.StatusCode, o.at
	}
}

// rejected reports whether the host turned an attempt away, or could not
// take it: 429, 502, 503 or 504, a timeout (the attempt's, or its
// context's deadline) or a connection error. Any other answer, a 500
// included, was served; a request its caller canceled says nothing.
func rejected(r *result) bool {
	if r.resp != nil {
		switch r.resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return r.err != nil && (r.outcome != outcomeCanceled || errors.Is(r.err, context.DeadlineExceeded))
}
