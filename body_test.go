package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/replay"
	"github.com/retryhttp/retryhttp/retrytest"
)

// opaqueBody hides the concrete reader, so that http.NewRequest sets no
// GetBody, and records whether it was closed.
type opaqueBody struct {
	r      io.Reader
	closed atomic.Bool
	read   atomic.Int64
}

func (b *opaqueBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}
func (b *opaqueBody) Close() error { b.closed.Store(true); return nil }

func TestBodyReplayedWithGetBody(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)))
	payload := bytes.Repeat([]byte("0123456789"), 1000)
	req := newRequest(t, "PUT", "http://example.test/", bytes.NewReader(payload))
	orig := req.GetBody
	var calls int
	req.GetBody = func() (io.ReadCloser, error) { calls++; return orig() }
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := retrytest.CheckSameBody(base.Attempts(), payload); err != nil {
		t.Error(err)
	}
	if base.Count() != 3 || calls != 2 {
		t.Errorf("%d attempts, GetBody called %d times; want 3 attempts, 2 calls (one per retry)", base.Count(), calls)
	}
}

func TestBodyBufferedWithoutGetBody(t *testing.T) {
	for _, declared := range []bool{true, false} {
		base := retrytest.NewScriptTransport(steps(503, 503)...)
		var lengths []int64
		rt := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			lengths = append(lengths, r.ContentLength)
			return base.RoundTrip(r)
		})
		tr, _ := testTransport(rt, WithBackoff(Constant(0)))
		payload := []byte(strings.Repeat("x", 5000))
		body := &opaqueBody{r: bytes.NewReader(payload)}
		req := newRequest(t, "PUT", "http://example.test/", body)
		if declared {
			req.ContentLength = int64(len(payload))
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := retrytest.CheckSameBody(base.Attempts(), payload); err != nil {
			t.Error(err)
		}
		if base.Count() != 3 || !body.closed.Load() || body.read.Load() != int64(len(payload)) {
			t.Errorf("declared %v: %d attempts, closed %v, read %d; want 3, true, %d (read once)",
				declared, base.Count(), body.closed.Load(), body.read.Load(), len(payload))
		}
		for i, l := range lengths {
			if l != req.ContentLength {
				t.Errorf("attempt %d ContentLength %d, want %d", i+1, l, req.ContentLength)
			}
		}
	}
}

func TestBodyTooLargeSentOnceWhole(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)), WithBodyBufferLimit(100))
	payload := bytes.Repeat([]byte("abcdefghij"), 100) // 1000 bytes
	body := &opaqueBody{r: bytes.NewReader(payload)}
	resp, err := tr.RoundTrip(newRequest(t, "PUT", "http://example.test/", body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != 1 || resp.StatusCode != 503 {
		t.Errorf("%d attempts, status %d; want 1 attempt and the 503", base.Count(), resp.StatusCode)
	}
	if err := retrytest.CheckSameBody(base.Attempts(), payload); err != nil {
		t.Error(err)
	}
	if !body.closed.Load() {
		t.Error("the caller's body was not closed")
	}
}

func TestBodyReadErrorLosesNothing(t *testing.T) {
	base := retrytest.NewScriptTransport()
	tr, _ := testTransport(base)
	boom := errors.New("disk on fire")
	body := &opaqueBody{r: io.MultiReader(strings.NewReader("abc"), errReader{boom})}
	resp, err := tr.RoundTrip(newRequest(t, "PUT", "http://example.test/", body))
	if resp != nil || !errors.Is(err, boom) || base.Count() != 0 || !body.closed.Load() {
		t.Errorf("RoundTrip = %v, %v after %d attempts, closed %v; want nil, the read error, 0, true",
			resp, err, base.Count(), body.closed.Load())
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestBodyGetBodyErrorGivesUpWithResponse(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)))
	req := newRequest(t, "PUT", "http://example.test/", strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || base.Count() != 1 {
		t.Fatalf("RoundTrip = %v, %v after %d attempts; want the 503 after 1", resp, err, base.Count())
	}
	resp.Body.Close()
}

func TestDiscardIsBounded(t *testing.T) {
	tests := []struct {
		name          string
		contentLength int64
		size          int
		wantMax       int64
	}{
		{"small, drained", 100, 100, 100},
		{"unknown length, drained up to the bound", -1, 1 << 20, maxDrain},
		{"declared too long, not read", 10 << 20, 10 << 20, 0},
	}
	for _, tt := range tests {
		body := &opaqueBody{r: bytes.NewReader(make([]byte, tt.size))}
		discard(withBody(respond(0), body, tt.contentLength))
		if body.read.Load() > tt.wantMax || (tt.wantMax > 0 && body.read.Load() == 0) || !body.closed.Load() {
			t.Errorf("%s: read %d bytes, closed %v; want at most %d, closed", tt.name, body.read.Load(), body.closed.Load(), tt.wantMax)
		}
	}
}

func TestBodyLongerThanDeclaredSentOnce(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)))
	body := &opaqueBody{r: strings.NewReader("hello, world")}
	req := newRequest(t, "PUT", "http://example.test/", body)
	req.ContentLength = 5
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The base sees what the caller gave, once; net/http would reject it.
	if err := retrytest.CheckSameBody(base.Attempts(), []byte("hello, world")); err != nil || base.Count() != 1 {
		t.Errorf("%d attempts, %v; want the caller's body once", base.Count(), err)
	}
}

// A body without GetBody longer than the limit, by one byte or more, of
// declared or unknown length, is sent once, whole, and not retried.
func TestBodyOverLimitSentOnce(t *testing.T) {
	for _, n := range []int{1001, 1200} {
		for _, declared := range []bool{true, false} {
			base := retrytest.NewScriptTransport(steps(503)...)
			tr, _ := testTransport(base, WithBodyBufferLimit(1000), WithBackoff(Constant(0)))
			payload := strings.Repeat("x", n)
			req := newRequest(t, "PUT", "http://h/", struct{ io.Reader }{strings.NewReader(payload)})
			if declared {
				req.ContentLength = int64(n)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if a := base.Attempts(); len(a) != 1 || a[0].BodyLength != n {
				t.Errorf("%d bytes (declared %v) over a 1000-byte limit: %d attempts, want 1 with the whole body", n, declared, len(a))
			}
		}
	}
}

// lateCloser answers like net/http's Transport: it reads the declared
// length of the body, returns the response, and only then, on its own
// goroutine and after a while, reads on to check that the body ends there
// and closes it. It answers 503 to the first attempt, 200 after, and
// never closes a body if hold is set.
type lateCloser struct {
	after time.Duration
	hold  bool
	fail  error // the first attempt's error, if not a 503
	mu    sync.Mutex
	sent  []string // each attempt's body as it was sent
	extra int64    // bytes found past the declared length
	wg    sync.WaitGroup
}

func (b *lateCloser) RoundTrip(r *http.Request) (*http.Response, error) {
	got := make([]byte, r.ContentLength)
	n, _ := io.ReadFull(r.Body, got)
	b.mu.Lock()
	b.sent = append(b.sent, string(got[:n]))
	code := 200
	if len(b.sent) == 1 {
		code = 503
	}
	first := len(b.sent) == 1
	b.mu.Unlock()
	if !b.hold {
		b.wg.Go(func() {
			time.Sleep(b.after)
			more, _ := io.Copy(io.Discard, r.Body)
			r.Body.Close()
			b.mu.Lock()
			b.extra += more
			b.mu.Unlock()
		})
	}
	if first && b.fail != nil {
		return nil, b.fail
	}
	return reply(r, code, nil), nil
}

// sharedGetBody makes req's GetBody rewind one reader, as azcore's does
// (it seeks its io.ReadSeeker back to 0), instead of making a new one.
func sharedGetBody(req *http.Request, payload string) {
	shared := strings.NewReader(payload)
	req.Body = io.NopCloser(shared)
	req.GetBody = func() (io.ReadCloser, error) {
		_, err := shared.Seek(0, io.SeekStart)
		return io.NopCloser(shared), err
	}
}

// A GetBody that rewinds a shared reader is called only once the transport
// below has closed the last attempt's body, as http.RoundTripper's
// contract asks of a caller that sends a body again: net/http reads to
// EOF and closes on its own goroutine, after RoundTrip has returned, and a
// rewind before that would send the next attempt a short body.
func TestBodyGetBodyWaitsForLastClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const payload = "quarterly numbers"
		base := &lateCloser{after: 10 * time.Millisecond}
		tr, _ := testTransport(base, WithBackoff(Constant(50*time.Millisecond)))
		req := newRequest(t, "PUT", "http://example.test/", nil)
		req.ContentLength = int64(len(payload))
		sharedGetBody(req, payload)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		base.wg.Wait()
		if want := []string{payload, payload}; !slices.Equal(base.sent, want) || base.extra != 0 {
			t.Errorf("attempts sent %q with %d bytes past the length; want %q and none", base.sent, base.extra, want)
		}
		if resp.StatusCode != 200 {
			t.Errorf("status %d, want 200", resp.StatusCode)
		}
	})
}

// A base that never closes a body breaks http.RoundTripper's contract:
// the retry gives up (GiveUpBody) after replay.CloseWait with the last response,
// rather than rewind a body that may still be read, or wait for ever.
func TestBodyNeverClosedGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &lateCloser{hold: true}
		var reason GiveUpReason
		tr, _ := testTransport(base, WithAttemptHook(func(ctx context.Context, _ AttemptStart) (context.Context, func(AttemptEnd)) {
			return ctx, func(e AttemptEnd) { reason = e.GiveUp }
		}))
		req := newRequest(t, "PUT", "http://example.test/", nil)
		req.ContentLength = 5
		sharedGetBody(req, "hello")
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || len(base.sent) != 1 || reason != GiveUpBody || time.Since(start) != replay.CloseWait {
			t.Errorf("status %d after %d attempts, %v, reason %q; want the 503 after 1, %v, %q",
				resp.StatusCode, len(base.sent), time.Since(start), reason, replay.CloseWait, GiveUpBody)
		}
	})
}

// A base that never closes the body waits for it once per request, however
// many places need the body (the length check after an error, then the
// retry's GetBody), and no longer than the request's WithMaxElapsed.
func TestBodyNeverClosedWaitsOnceWithinTheRequestsBounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fail   error
		opts   []Option
		took   time.Duration
		reason GiveUpReason
	}{
		{"error", io.ErrUnexpectedEOF, nil, replay.CloseWait, GiveUpBody},
		{"max-elapsed", nil, []Option{WithMaxElapsed(200 * time.Millisecond)}, 200 * time.Millisecond, GiveUpMaxElapsed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &lateCloser{hold: true, fail: tc.fail}
				var reason GiveUpReason
				opts := append(tc.opts, WithAttemptHook(func(ctx context.Context, _ AttemptStart) (context.Context, func(AttemptEnd)) {
					return ctx, func(e AttemptEnd) { reason = e.GiveUp }
				}))
				tr, _ := testTransport(base, opts...)
				req := newRequest(t, "PUT", "http://example.test/", nil)
				req.ContentLength = 5
				sharedGetBody(req, "hello")
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
				}
				if (err != nil) != (tc.fail != nil) || len(base.sent) != 1 || reason != tc.reason || time.Since(start) > tc.took {
					t.Errorf("err %v after %d attempts, %v, reason %q; want %d attempt, at most %v, %q",
						err, len(base.sent), time.Since(start), reason, 1, tc.took, tc.reason)
				}
			})
		})
	}
}
