// This file holds an in-memory scripted RoundTripper, for tests that need
// no network at all.

package retrytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// RoundTripperFunc adapts a function to http.RoundTripper.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip returns f(req).
func (f RoundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A Step is one scripted outcome of a ScriptTransport: a Reply, or Err.
type Step struct {
	Reply
	Err error
}

// ScriptTransport is an http.RoundTripper that answers from a script in
// memory, the n-th request with the n-th Step and every request after the
// script with 200 "ok". It reads and closes each request body, as the
// RoundTripper contract requires, records each attempt, and tracks the
// bodies of the responses it hands out, so that a test can check that
// every one was closed. A Step's Delay and the Hang fault wait on the
// request's context (bounded, as every fault is), and a response body
// fails to read once that context is done, as net/http's do; other faults
// are ignored: use Err. It needs no network, so a test can run it under
// testing/synctest. It is safe for concurrent use.
type ScriptTransport struct {
	mu       sync.Mutex
	steps    []Step
	attempts []Attempt
	open     atomic.Int64
}

// NewScriptTransport returns a ScriptTransport with the given script.
func NewScriptTransport(steps ...Step) *ScriptTransport {
	return &ScriptTransport{steps: steps}
}

// RoundTrip implements http.RoundTripper.
func (s *ScriptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(req.Body, 64<<20))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	i := len(s.attempts)
	s.attempts = append(s.attempts, Attempt{
		Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(),
		BodyLength: len(body), BodySHA256: hex.EncodeToString(sum[:]),
	})
	step := Step{Reply: Reply{Body: "ok"}}
	if i < len(s.steps) {
		step = s.steps[i]
	}
	s.mu.Unlock()
	wait := step.Delay
	if step.Fault == Hang {
		wait = maxFaultWait
	}
	if wait > 0 {
		t := time.NewTimer(min(wait, maxFaultWait))
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if step.Err != nil {
		return nil, step.Err
	}
	h := http.Header{}
	for k, v := range step.Header {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(len(step.Body)))
	s.open.Add(1)
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", status(step.Reply), http.StatusText(status(step.Reply))),
		StatusCode: status(step.Reply), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: int64(len(step.Body)), Request: req,
		Body: &trackedBody{Reader: bytes.NewReader([]byte(step.Body)), open: &s.open, ctx: req.Context()},
	}, nil
}

// Attempts returns a copy of the attempts received so far, in order.
func (s *ScriptTransport) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
}

// Count returns the number of attempts received so far.
func (s *ScriptTransport) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.attempts)
}

// OpenBodies returns how many response bodies handed out are not closed.
func (s *ScriptTransport) OpenBodies() int { return int(s.open.Load()) }

type trackedBody struct {
	*bytes.Reader
	open   *atomic.Int64
	closed atomic.Bool
	ctx    context.Context
}

func (b *trackedBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.Reader.Read(p)
}

func (b *trackedBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.open.Add(-1)
	}
	return nil
}
