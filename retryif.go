// This file holds the user's own retry condition (WithRetryIf): the
// Decision it returns, and the body it may read without taking it from the
// caller. The built-in rules it refines are in status.go; the method gate
// it cannot lift is in decide.go.

package retryhttp

import (
	"bytes"
	"io"
	"net/http"
)

// A Decision is what a condition given to WithRetryIf says of an attempt.
type Decision int8

const (
	// NoOpinion leaves the decision to the built-in rules (status codes
	// and transport errors, status.go): the condition has nothing to say
	// of this attempt.
	NoOpinion Decision = iota
	// Retry says the attempt failed in a way worth retrying. The request
	// is still retried only if it may be repeated (its method, its key)
	// and the policy lets it (attempts, deadline, budget, breaker).
	Retry
	// DontRetry says the attempt's outcome is final: it is returned as is.
	DontRetry
)

// WithRetryIf sets a condition that refines, attempt by attempt, what is
// worth retrying: it may widen the built-in rules (a 403 whose body says
// "try again") or narrow them. It never lifts the method gate, nor retries
// a request whose context is done. f runs on the goroutine of RoundTrip
// with the attempt's response (nil on an error) and error; it may read
// the body, which the caller still reads whole (docs/retries.md), but
// not close it. The default is none.
func WithRetryIf(f func(resp *http.Response, err error) Decision) RequestOption {
	return requestOption("WithRetryIf", func(c *config) error {
		c.retryIf = f
		return nil
	})
}

// applyRetryIf lets the user's condition refine r's classification.
func (k *call) applyRetryIf(r *result) {
	var peek *peekBody
	if r.resp != nil && r.resp.Body != nil && r.resp.Body != http.NoBody {
		peek = &peekBody{body: r.resp.Body}
		r.resp.Body = peek
	}
	d := k.c.retryIf(r.resp, r.err)
	if peek != nil {
		r.resp.Body = peek.rewound()
	}
	switch d {
	case Retry:
		r.retryable = k.ctx.Err() == nil
		if r.err != nil {
			r.notSent = r.retryable && k.neverSent(r.err)
		}
	case DontRetry:
		r.retryable, r.notSent = false, false
	}
}

// peekBody records what a condition reads of a response body, so that the
// caller can be given the whole body afterwards.
type peekBody struct {
	body io.ReadCloser
	read bytes.Buffer
}

func (p *peekBody) Read(b []byte) (int, error) {
	n, err := p.body.Read(b)
	p.read.Write(b[:n])
	return n, err
}

func (p *peekBody) Close() error { return nil } // the body is not the condition's to close

// rewound returns the body as the caller must see it: the original if
// nothing was read, else what was read followed by the rest.
func (p *peekBody) rewound() io.ReadCloser {
	if p.read.Len() == 0 {
		return p.body
	}
	return &prefixedBody{Reader: io.MultiReader(&p.read, p.body), Closer: p.body}
}

type prefixedBody struct {
	io.Reader
	io.Closer
}
