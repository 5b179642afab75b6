package retryhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", " 3 ", "-1", "1.5", "99999999999999999999",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Wednesday, 21-Oct-15 07:28:00 GMT", "Wed Oct 21 07:28:00 2015",
		"Fri, 31 Dec 9999 23:59:59 GMT", "", "soon"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if d < 0 || d > maxRetryAfterSeconds*time.Second {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, cap]", v, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: a value with !ok", v, d)
		}
		if tm, err := http.ParseTime(strings.TrimSpace(v)); err == nil && !tm.After(now) && (d != 0 || !ok) {
			t.Fatalf("ParseRetryAfter(%q), a date in the past, = %v, %v; want 0, true", v, d, ok)
		}
	})
}

// fuzzBase is an in-memory base RoundTripper driven by a script of
// outcomes, one byte each, that records what it received and which of its
// response bodies are still open.
type fuzzBase struct {
	script []byte
	mu     sync.Mutex
	n      int
	sums   [][32]byte
	sent   []bool // whether the attempt reached "the server"
	open   atomic.Int64
}

type fuzzBody struct {
	io.Reader
	open   *atomic.Int64
	closed atomic.Bool
}

func (b *fuzzBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.open.Add(-1)
	}
	return nil
}

func (fb *fuzzBase) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	fb.mu.Lock()
	var op, arg byte
	if 2*fb.n+1 < len(fb.script) {
		op, arg = fb.script[2*fb.n], fb.script[2*fb.n+1]
	}
	fb.n++
	fb.sums = append(fb.sums, sha256.Sum256(body))
	sent := op%8 != 4
	fb.sent = append(fb.sent, sent)
	fb.mu.Unlock()
	resp := func(code int, h http.Header) (*http.Response, error) {
		if h == nil {
			h = http.Header{}
		}
		fb.open.Add(1)
		return withBody(reply(r, code, h), &fuzzBody{Reader: strings.NewReader("body"), open: &fb.open}, 0), nil
	}
	switch op % 8 {
	case 1:
		return resp(503, nil)
	case 2:
		v := []string{"0", "1", "5", "31", "-1", "soon", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999"}[arg%8]
		return resp(429, http.Header{"Retry-After": {v}})
	case 3:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	case 4:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case 5:
		return resp(500+int(arg%12), nil)
	case 6:
		return resp(400+int(arg%32), nil)
	case 7: // hang until the attempt's context ends
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return resp(200, nil)
}

func FuzzTransport(f *testing.F) {
	f.Add(uint8(0), uint8(4), false, true, []byte{1, 0, 1, 0, 0, 0})
	f.Add(uint8(1), uint8(4), false, true, []byte{4, 0, 4, 0, 1, 0})
	f.Add(uint8(1), uint8(6), true, false, []byte{3, 0, 2, 3, 0, 0})
	f.Add(uint8(2), uint8(3), false, false, []byte{2, 1, 2, 6, 5, 3})
	f.Add(uint8(3), uint8(5), true, true, []byte{7, 0, 1, 0, 0, 0})
	f.Add(uint8(0), uint8(2), false, true, []byte{6, 9, 1, 1})
	f.Fuzz(func(t *testing.T, method, attempts uint8, key, getBody bool, script []byte) {
		if len(script) > 64 {
			script = script[:64]
		}
		m := []string{"GET", "POST", "PATCH", "PUT"}[method%4]
		maxAttempts := 1 + int(attempts%6)
		synctest.Test(t, func(t *testing.T) { fuzzOne(t, m, method, attempts, maxAttempts, key, getBody, script) })
	})
}

func fuzzOne(t *testing.T, m string, method, attempts uint8, maxAttempts int, key, getBody bool, script []byte) {
	{
		fb := &fuzzBase{script: script}
		start := time.Now()
		tr := New(fb, WithMaxAttempts(maxAttempts), WithoutBudget(),
			WithBackoff(Exponential(time.Second, 8*time.Second)), WithPerAttemptTimeout(time.Millisecond))
		payload := bytes.Repeat([]byte{method, attempts}, 100)
		var body io.Reader = bytes.NewReader(payload)
		if !getBody {
			body = struct{ io.Reader }{body}
		}
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(20*time.Second))
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, m, "http://example.test/p?q=1", body)
		if key {
			req.Header.Set(HeaderIdempotencyKey, "k")
		}
		before := req.Header.Clone()

		resp, err := tr.RoundTrip(req)

		if (resp == nil) == (err == nil) {
			t.Fatalf("RoundTrip = %v, %v: want exactly one of them", resp, err)
		}
		if fb.n > maxAttempts {
			t.Fatalf("%d attempts, max %d", fb.n, maxAttempts)
		}
		want := sha256.Sum256(payload)
		for i, s := range fb.sums {
			if s != want {
				t.Fatalf("attempt %d's body differs from the caller's", i+1)
			}
		}
		if idempotent := slices.Contains([]string{"", "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}, m); !idempotent && !key {
			for i, sent := range fb.sent {
				if sent && i < len(fb.sent)-1 {
					t.Fatalf("%s without a key sent again after attempt %d reached the server", m, i+1)
				}
			}
		}
		if total := time.Since(start); total >= 20*time.Second {
			t.Fatalf("waited %v in all, past the 20s deadline", total)
		}
		if len(req.Header) != len(before) || req.Header.Get(HeaderIdempotencyKey) != before.Get(HeaderIdempotencyKey) ||
			req.URL.String() != "http://example.test/p?q=1" || req.Method != m {
			t.Fatalf("the caller's request changed")
		}
		if resp != nil {
			// The returned one, or none if the breaker held the last
			// retry and kept a copy of the response to return.
			if fb.open.Load() > 1 {
				t.Fatalf("%d response bodies open, want only the returned one", fb.open.Load())
			}
			resp.Body.Close()
		}
		if fb.open.Load() != 0 {
			t.Fatalf("%d response bodies left open", fb.open.Load())
		}
	}
}
