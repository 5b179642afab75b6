// This file holds the simulator's fallbacks: WithFallback, with a
// function that makes a response for some requests, declines for others
// and fails for others, and a policy's fallback section, both drawn by
// drawFallback on drawCriticality's stream (sim_criticality_test.go); and
// the invariants it checks:
//
//   - the function is called once for a request that gave up (as its
//     give-up log record says), never for another: never with a success
//     or a final answer, always with exactly one of a response worth
//     retrying and a give-up's *Error;
//   - what it makes is returned, marked with Retryhttp-Fallback and the
//     give-up's reason; its error alone is returned; if it declines, the
//     request's own outcome; the response it replaces is closed; RoundTrip
//     returns exactly one of a response and an error;
//   - the policy's fallback comes back with every request that gave up
//     (Error.Fallback, FallbackOf), and with no other.

package retryhttp

import (
	"cmp"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
)

// errSimFallback is the error a fallback function returns.
var errSimFallback = errors.New("sim: the fallback's own error")

// simFallbackMode is what the fallback function returns for a caller.
type simFallbackMode uint8

const (
	fbMakes    simFallbackMode = iota // a made-up response
	fbDeclines                        // nil, nil: the request's own outcome stands
	fbFails                           // an error of its own
	fbBoth                            // a made-up response and an error: the response is returned
	fbOriginal                        // the response it was handed (a made-up one if none)
	numFallbackModes
)

var fallbackModes = [numFallbackModes]string{"makes", "declines", "fails", "both", "original"}

// simFallbackCall is one call of the fallback function: what it was
// handed, and what it returned.
type simFallbackCall struct {
	resp    *http.Response
	err     error
	body    *simTrackedBody // resp's body, as the function saw it
	made    *http.Response
	madeErr error
}

// simFellBack is what RoundTrip returned to a caller whose request the
// fallback function was called for (simOutcome keeps what the function
// was handed, the request's own outcome, for sim_test.go's checks).
type simFellBack struct {
	called bool
	resp   *http.Response
	err    error
	closed bool // the body of the response the function was handed was closed by then
}

// simTrackedBody tells whether a body was closed.
type simTrackedBody struct {
	io.ReadCloser
	closed atomic.Bool
}

func (b *simTrackedBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

// drawFallback draws WithFallback, with what its function does for each
// caller, and a policy's fallback section.
func (s *simulation) drawFallback(r *rand.Rand) {
	cr := &s.crit
	if r.IntN(4) == 0 {
		cr.fallback, cr.calls = true, map[string][]simFallbackCall{}
		s.opts = append(s.opts, WithFallback(s.fallback))
		for i := range s.callers {
			s.callers[i].crit.fallback = simFallbackMode(r.IntN(int(numFallbackModes)))
		}
		s.desc = append(s.desc, "fallback")
	}
	if r.IntN(4) == 0 {
		cr.policy = &Fallback{Type: "partial_response", UserMessage: "sim " + strconv.Itoa(r.IntN(100))}
		s.opts = append(s.opts, withPolicyFallback(*cr.policy))
		s.desc = append(s.desc, "policy-fallback")
	}
}

// fallback is WithFallback's function: it records what it is handed,
// and returns what the caller's mode says.
func (s *simulation) fallback(req *http.Request, resp *http.Response, err error) (*http.Response, error) {
	id := req.Header.Get("X-Sim")
	i, _ := strconv.Atoi(id)
	k := simFallbackCall{resp: resp, err: err}
	if resp != nil && resp.Body != nil {
		k.body = &simTrackedBody{ReadCloser: resp.Body}
		resp.Body = k.body
	}
	made := &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: http.NoBody, Request: req}
	if i%2 == 0 {
		made.Header = http.Header{"X-Made": {"sim"}} // and nil for the others: RoundTrip makes one
	}
	switch s.callers[i].crit.fallback {
	case fbMakes:
		k.made = made
	case fbFails:
		k.madeErr = errSimFallback
	case fbBoth:
		k.made, k.madeErr = made, errSimFallback
	case fbOriginal:
		k.made = cmp.Or(resp, made)
	}
	s.mu.Lock()
	s.crit.calls[id] = append(s.crit.calls[id], k)
	s.mu.Unlock()
	return k.made, k.madeErr
}

// setAside keeps, in o.fb, what RoundTrip returned after the fallback
// function was called for c's request (closing a response it made), and
// puts in o what the function was handed: the request's own outcome, which
// sim_test.go's checks judge.
func (s *simulation) setAside(c simCaller, o *simOutcome) {
	if !s.crit.fallback {
		return
	}
	s.mu.Lock()
	calls := s.crit.calls[c.id]
	s.mu.Unlock()
	if len(calls) == 0 {
		return
	}
	k := calls[len(calls)-1]
	o.fb = simFellBack{called: true, resp: o.resp, err: o.err, closed: k.body != nil && k.body.closed.Load()}
	if o.resp != nil && o.resp != k.resp {
		o.resp.Body.Close()
	}
	o.resp, o.err = k.resp, k.err
}

// checkFallback checks the fallback function's calls for c's request:
// none if it did not give up, one if it did, with what the request would
// have ended with; and what RoundTrip returned then.
func (s *simulation) checkFallback(c simCaller, o simOutcome, gave []simGiveUp, fail func(string, ...any)) {
	s.mu.Lock()
	calls := s.crit.calls[c.id]
	s.mu.Unlock()
	if !o.fb.called && o.resp != nil && o.resp.Header.Get("Retryhttp-Fallback") != "" {
		fail("caller %s: a response no fallback made carries Retryhttp-Fallback: %q", c.id, o.resp.Header.Get("Retryhttp-Fallback"))
	}
	switch {
	case len(calls) > 1:
		fail("caller %s: the fallback was called %d times for one request", c.id, len(calls))
	case !s.crit.fallback:
		return
	case len(calls) != len(gave):
		fail("caller %s: the fallback was called %d times; the request gave up %d times: %v", c.id, len(calls), len(gave), gave)
	}
	if len(calls) == 0 {
		return
	}
	k := calls[0]
	reason := s.checkHanded(c, k, fail)
	if len(gave) == 1 {
		if reason != "" && reason != gave[0].reason {
			fail("caller %s: the fallback was handed an error of reason %q; the request gave up as %q", c.id, reason, gave[0].reason)
		}
		reason = gave[0].reason
	}
	s.checkFellBack(c, k, o.fb, reason, fail)
}

// checkPolicyFallback checks that the policy's fallback comes back in
// every *Error, in c's response (FallbackOf) if it gave up, and in a
// response the fallback function made; and with no other response.
func (s *simulation) checkPolicyFallback(c simCaller, o simOutcome, gave []simGiveUp, fail func(string, ...any)) {
	want := s.crit.policy
	if want == nil {
		return
	}
	var got *Fallback
	var re *Error
	isErr := false
	switch {
	case o.resp != nil:
		got = FallbackOf(o.resp)
	case errors.As(o.err, &re):
		got, isErr = re.Fallback, true
	}
	switch {
	case (len(gave) > 0 || isErr) && (got == nil || *got != *want):
		fail("caller %s gave up (%d) or ended in an *Error (%v) with %v, %v, which carries the fallback %v: want the policy's %v", c.id, len(gave), isErr, simStatus(o.resp), o.err, got, *want)
	case len(gave) == 0 && !isErr && got != nil:
		fail("caller %s did not give up, but its %v carries the policy's fallback %v", c.id, simStatus(o.resp), *got)
	}
	if made := o.fb.resp; made != nil && made != o.resp {
		if got := FallbackOf(made); got == nil || *got != *want {
			fail("caller %s: the response the fallback function made carries the fallback %v: want the policy's %v", c.id, got, *want)
		}
	}
}

// checkHanded checks what the fallback function was handed: what
// RoundTrip would have returned for a request that gave up, a response
// worth retrying or an *Error with a give-up reason, which it returns.
func (s *simulation) checkHanded(c simCaller, k simFallbackCall, fail func(string, ...any)) (reason string) {
	var re *Error
	switch {
	case (k.resp == nil) == (k.err == nil):
		fail("caller %s: the fallback was handed %v and %v: want exactly one", c.id, simStatus(k.resp), k.err)
	case k.resp != nil && s.finalStatus(k.resp):
		fail("caller %s: the fallback was handed a %d, a final answer, not a give-up", c.id, k.resp.StatusCode)
	case k.resp == nil && (!errors.As(k.err, &re) || re.Reason == ""):
		fail("caller %s: the fallback was handed %v, not a give-up's *Error", c.id, k.err)
	case k.resp == nil:
		return string(re.Reason)
	}
	return ""
}

// finalStatus reports whether resp is an answer the Transport takes as
// it is: a success, a status the server says not to retry (x-should-retry:
// false on every answer), or a 503 with WithNonRetryableStatuses(503).
func (s *simulation) finalStatus(resp *http.Response) bool {
	switch {
	case resp.StatusCode < 400:
		return true
	case s.faults.shouldRetry != "":
		return s.faults.shouldRetry == "false"
	}
	return resp.StatusCode == http.StatusServiceUnavailable && s.final503
}

// checkFellBack checks what RoundTrip returned once the fallback
// function returned k.made and k.madeErr: exactly one of a response and
// an error; what it made, marked with the give-up's reason, if it made a
// response; its error alone if it failed; the request's own outcome if it
// declined; and the response it was handed closed, if that is not returned.
func (s *simulation) checkFellBack(c simCaller, k simFallbackCall, fb simFellBack, reason string, fail func(string, ...any)) {
	mode := fallbackModes[c.crit.fallback]
	if (fb.resp == nil) == (fb.err == nil) {
		fail("caller %s: after its fallback (%s), RoundTrip = %v, %v: want exactly one", c.id, mode, fb.resp, fb.err)
	}
	want, wantErr := k.made, k.madeErr
	switch {
	case want == nil && wantErr == nil:
		want, wantErr = k.resp, k.err // declined: the request's own outcome
	case want != nil:
		wantErr = nil
	}
	if fb.resp != want || fb.err != wantErr {
		fail("caller %s: the fallback (%s) returned %v, %v; RoundTrip returned %v, %v, want %v, %v",
			c.id, mode, simStatus(k.made), k.madeErr, simStatus(fb.resp), fb.err, simStatus(want), wantErr)
	}
	if fb.resp != nil {
		got := fb.resp.Header.Get("Retryhttp-Fallback")
		switch {
		case k.made == nil && got != "":
			fail("caller %s: the fallback (%s) made no response, but RoundTrip's carries Retryhttp-Fallback: %q", c.id, mode, got)
		case k.made != nil && (got == "" || (reason != "" && got != reason)):
			fail("caller %s: the fallback's response carries Retryhttp-Fallback: %q, want the give-up's reason %q", c.id, got, reason)
		}
	}
	if k.resp != nil && fb.resp != k.resp && !fb.closed {
		fail("caller %s: the fallback (%s) replaced the request's %d, whose body was left open", c.id, mode, k.resp.StatusCode)
	}
}
