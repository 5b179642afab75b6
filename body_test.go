package retryhttp

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

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
