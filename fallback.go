// This file holds graceful degradation: what a dependency's policy says
// the caller serves when the dependency cannot answer (Fallback), how the
// caller learns it from what RoundTrip returns (Error.Fallback,
// FallbackOf), and the caller's own fallback, called once when a request
// gives up (WithFallback).

package retryhttp

import (
	"context"
	"log/slog"
	"net/http"
)

// A Fallback is what a dependency's policy says the caller serves when
// the dependency cannot answer: its fallback section. RoundTrip never
// serves it by itself; it hands it to the caller with a request that gave
// up, in Error.Fallback or, with the final response, through FallbackOf.
type Fallback struct {
	Type        string // the policy's fallback.type: "partial_response", say
	UserMessage string // the policy's fallback.user_message, for the page
}

// headerFallback marks a response that WithFallback's function made: its
// value is the give-up reason that called it ("breaker", "attempts", ...).
const headerFallback = "Retryhttp-Fallback"

type fallbackKey struct{}

// FallbackOf is the dependency's Fallback carried by resp, a final
// response that RoundTrip returned after giving up on it (a retryable
// status whose retries ended, or that could not be retried), or that
// WithFallback's function made; nil if resp is none of those, or its
// policy says nothing of a fallback. A response that the request was
// not retried for (a 404) carries none: it is the dependency's answer.
// It is carried in the context of resp.Request, which is then a copy of
// the request sent.
func FallbackOf(resp *http.Response) *Fallback {
	if resp == nil || resp.Request == nil {
		return nil
	}
	f, _ := resp.Request.Context().Value(fallbackKey{}).(*Fallback)
	return f
}

// WithFallback sets a function called once when a request gives up
// without a usable response (refused, out of attempts or time, a status
// worth retrying not retried), with the request and what RoundTrip would
// return. A response it returns is returned instead, marked with the
// header Retryhttp-Fallback (the give-up reason) and counted, the
// original closed; an error alone is returned; neither keeps the
// outcome. A nil function is invalid. By default none is called.
func WithFallback(fn func(*http.Request, *http.Response, error) (*http.Response, error)) Option {
	return option("WithFallback", func(c *config) error {
		if fn == nil {
			return optErr("WithFallback(nil)", "a function is required")
		}
		c.fallbackFn = fn
		return nil
	})
}

// withPolicyFallback is the option a policy's fallback section stands for.
func withPolicyFallback(f Fallback) Option {
	return option("fallback", func(c *config) error {
		c.fallback = &f
		return nil
	})
}

// fallBack ends a request that gave up (e), returning resp or err, with
// the policy's Fallback attached to resp (an *Error has it already), and,
// with WithFallback, what the caller's function makes of it.
func (k *call) fallBack(e *event, resp *http.Response, err error) (*http.Response, error) {
	c := k.c
	if fb := c.fallback; fb != nil && resp != nil {
		resp.Request = withFallback(resp.Request, k.req, fb)
	}
	if c.fallbackFn == nil {
		return resp, err
	}
	fr, ferr := c.fallbackFn(k.req, resp, err)
	switch {
	case fr == nil && ferr == nil:
		return resp, err
	case resp != nil && fr != resp && (fr == nil || fr.Body != resp.Body):
		resp.Body.Close()
	}
	if fr == nil {
		return nil, ferr
	}
	k.markFallback(fr, e.reason)
	c.metrics.fallback(e.reason)
	if c.logger != nil {
		c.logger.LogAttrs(k.ctx, slog.LevelInfo, "retryhttp: serving a fallback", k.logAttrs(e.attempt, 0, e.r.outcome, e.reason)...)
	}
	return fr, nil
}

// markFallback makes fr, a response the caller's function made for a
// request that gave up for reason, whole and marked: a header map, a
// body (http.NoBody, as a RoundTripper's response must have one), its
// request (with the policy's Fallback), and headerFallback.
func (k *call) markFallback(fr *http.Response, reason GiveUpReason) {
	if fr.Header == nil {
		fr.Header = make(http.Header)
	}
	if fr.Body == nil {
		fr.Body = http.NoBody
	}
	fr.Header.Set(headerFallback, string(reason))
	switch {
	case k.c.fallback != nil:
		fr.Request = withFallback(fr.Request, k.req, k.c.fallback)
	case fr.Request == nil:
		fr.Request = k.req
	}
}

// withFallback is r (req if r is nil) with fb in its context, for
// FallbackOf.
func withFallback(r, req *http.Request, fb *Fallback) *http.Request {
	if r == nil {
		r = req
	}
	return r.WithContext(context.WithValue(r.Context(), fallbackKey{}, fb))
}

// callerOptions are the options of what a policy says of its callers:
// criticality (WithCriticality, its text read by policyCriticality) and
// the fallback section.
func (d *policyDoc) callerOptions() ([]fieldOption, error) {
	var fos []fieldOption
	if d.Criticality != "" {
		c, err := policyCriticality(d.Criticality)
		if err != nil {
			return nil, fieldErr("criticality", "%v", err)
		}
		fos = append(fos, fieldOption{"criticality", WithCriticality(c)})
	}
	if f := d.Fallback; f != nil && (f.Type != "" || f.UserMessage != "") {
		fos = append(fos, fieldOption{"fallback.type", withPolicyFallback(Fallback{Type: f.Type, UserMessage: f.UserMessage})})
	}
	return fos, nil
}
