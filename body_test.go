package retryhttp

import (
	"bytes"
	"context"
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
		discard(&http.Response{Body: body, ContentLength: tt.contentLength})
		if body.read.Load() > tt.wantMax || (tt.wantMax > 0 && body.read.Load() == 0) || !body.closed.Load() {
			t.Errorf("%s: read %d bytes, closed %v; want at most %d, closed", tt.name, body.read.Load(), body.closed.Load(), tt.wantMax)
		}
	}
}

// capture runs a tee as the first attempt would (the base reads the body
// to its end and closes it), then takes the whole body for a retry.
func capture(body io.ReadCloser, declared, limit int64, baseReads bool) (chunks, error) {
	tee := newTeeBody(body, declared, limit)
	if baseReads {
		io.Copy(io.Discard, tee)
	}
	tee.Close()
	cs, err := tee.rest(context.Background())
	tee.release()
	return cs, err
}

// A body of declared length is kept in few chunks (they double), holding
// exactly its length: nothing beyond it, nothing ahead of what arrived.
func TestTeeDeclaredLengthFewChunks(t *testing.T) {
	payload := make([]byte, 100000)
	cs, err := capture(io.NopCloser(bytes.NewReader(payload)), int64(len(payload)), 1<<20, true)
	var held int
	for _, c := range cs {
		held += cap(c)
	}
	if err != nil || len(cs) > 10 || held != len(payload) {
		t.Errorf("capture = %d chunks holding %d bytes, %v; want at most 10 chunks of exactly %d bytes in all", len(cs), held, err, len(payload))
	}
}

func TestTeeEdges(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		declared int64
		limit    int64
		wantBuf  string
		wantErr  error
	}{
		{"declared, exact", "hello", 5, 10, "hello", nil},
		{"declared, shorter", "hel", 5, 10, "hel", nil},
		{"declared, longer", "hello!!", 5, 10, "hello!!", nil},
		{"unknown, fits", "hello", -1, 10, "hello", nil},
		{"unknown, exactly the limit", "hello", 0, 5, "hello", nil},
		{"unknown, over the limit", "hello world", 0, 5, "", errTooLong},
		{"limit 0, empty", "", 0, 0, "", nil},
	}
	for _, tt := range tests {
		for _, baseReads := range []bool{true, false} {
			body := &opaqueBody{r: strings.NewReader(tt.body)}
			cs, err := capture(body, tt.declared, tt.limit, baseReads)
			if err != tt.wantErr || string(bytes.Join(cs, nil)) != tt.wantBuf || !body.closed.Load() {
				t.Errorf("%s (base reads %v): kept %q, %v (closed %v); want %q, %v, closed", tt.name, baseReads,
					bytes.Join(cs, nil), err, body.closed.Load(), tt.wantBuf, tt.wantErr)
			}
		}
	}
	stuck := &opaqueBody{r: zeroReader{}}
	if _, err := capture(stuck, -1, 10, false); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("a reader that returns nothing: %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

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

// A body of unknown length is kept in chunks that are never copied: the
// memory they hold is within 4 KiB or a twelfth of the body's (the unused
// end of the last chunk), whatever its size, and replaying it gives the
// same bytes.
func TestTeeUnknownLengthOneCopy(t *testing.T) {
	for _, n := range []int{1, 511, 512, 1000, 64 << 10, 1<<20 + 3} {
		payload := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
		cs, err := capture(io.NopCloser(struct{ io.Reader }{bytes.NewReader(payload)}), -1, 2<<20, true)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, _ := io.ReadAll(newReplayBody(cs))
		var w bytes.Buffer
		io.Copy(&w, newReplayBody(cs))
		if !bytes.Equal(got, payload) || !bytes.Equal(w.Bytes(), payload) {
			t.Errorf("%d bytes: replayed %d and %d bytes that differ", n, len(got), w.Len())
		}
		held := 0
		for _, c := range cs {
			held += cap(c)
		}
		if limit := n + max(n/12, 4<<10); held > limit {
			t.Errorf("%d bytes: chunks hold %d bytes, want at most %d", n, held, limit)
		}
	}
}

// BenchmarkTeeUnknownLength measures the bytes allocated to keep a 64 KiB
// body of unknown length while a base reads it: about 1.1 times the body.
func BenchmarkTeeUnknownLength(b *testing.B) {
	payload := make([]byte, 64<<10)
	r := bytes.NewReader(payload)
	body := io.NopCloser(struct{ io.Reader }{r})
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		r.Reset(payload)
		capture(body, -1, 1<<20, true)
	}
}
