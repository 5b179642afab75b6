package bench

// The success path of each contender against the bare transport, in the
// same run:
//
//	go test -run '^$' -bench . -benchmem -count 8 > success.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /rt success.txt

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func successContenders() []Contender {
	// bare-again, last, is a control: its ratio to bare is the run's noise.
	bareAgain := Contender{Name: "bare-again", New: Bare.New}
	return []Contender{Bare, RetryHTTP, Retryablehttp(CommonPolicy), Failsafe(CommonPolicy), bareAgain}
}

func base() *http.Transport { return &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64} }

func server(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "19")
		io.WriteString(w, "hello from retryhtt")
	}))
	b.Cleanup(srv.Close)
	return srv
}

func do(b *testing.B, rt http.RoundTripper, req *http.Request) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func BenchmarkGET(b *testing.B) {
	srv := server(b)
	for _, c := range successContenders() {
		b.Run("rt="+c.Name, func(b *testing.B) {
			bt := base()
			defer bt.CloseIdleConnections()
			rt := c.New(bt)
			do(b, rt, mustReq(b, "GET", srv.URL, nil))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				do(b, rt, mustReq(b, "GET", srv.URL, nil))
			}
		})
	}
}

// BenchmarkPOST64KiB sends a 64 KiB keyed POST that succeeds at once, its
// body with GetBody (bytes.Reader), and without GetBody or a length (sent
// chunked: a file, a pipe, an encoder), which every contender must copy
// to be able to send it again.
func BenchmarkPOST64KiB(b *testing.B) {
	srv := server(b)
	payload := bytes.Repeat([]byte("x"), 64<<10)
	for _, body := range []string{"GetBody", "chunked"} {
		for _, c := range successContenders() {
			b.Run("body="+body+"/rt="+c.Name, func(b *testing.B) {
				bt := base()
				defer bt.CloseIdleConnections()
				rt := c.New(bt)
				newReq := func() *http.Request {
					var r io.Reader = bytes.NewReader(payload) // GetBody is set
					if body == "chunked" {
						r = io.NopCloser(bytes.NewReader(payload)) // no GetBody, no length
					}
					req := mustReq(b, "POST", srv.URL, r)
					req.Header.Set("Idempotency-Key", "bench")
					return req
				}
				do(b, rt, newReq())
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				b.ResetTimer()
				for b.Loop() {
					do(b, rt, newReq())
				}
			})
		}
	}
}

func mustReq(b *testing.B, method, url string, body io.Reader) *http.Request {
	r, err := http.NewRequest(method, url, body)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkOverhead is what each contender itself costs per successful
// GET, without the network's noise: the base answers from memory at once.
// "visible" is a base that says (Unwrap) that it wraps an *http.Transport,
// as a tracing middleware over one would; "opaque" hides what it wraps.
// Only retryhttp's cost differs between them: over an opaque base it must
// mark each request's context so that a Transport hidden below does not
// retry too. The base makes a fresh response each time (one allocation,
// bare's too), since some contenders wrap its body.
func BenchmarkOverhead(b *testing.B) {
	header := http.Header{}
	mem := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: header, Body: http.NoBody}, nil
	})
	for _, kind := range []string{"visible", "opaque"} {
		var base http.RoundTripper = mem
		if kind == "visible" {
			base = seenThrough{mem}
		}
		cs := successContenders()
		cs = append(cs[:len(cs)-1:len(cs)-1], markOnly, cs[len(cs)-1]) // before the control
		for _, c := range cs {
			b.Run("base="+kind+"/rt="+c.Name, func(b *testing.B) {
				rt := c.New(base)
				req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
				do(b, rt, req)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					do(b, rt, req)
				}
			})
		}
	}
}

// markOnly is the floor of retryhttp's cost over an opaque base: it does
// nothing but mark each request as retryhttp does, a copy of the request
// whose context carries a value, both in one allocation, and sends it.
var markOnly = Contender{Name: "mark-only", New: func(base http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		m := new(markedRequest)
		m.ctx.Context = r.Context()
		m.r = *r.WithContext(&m.ctx)
		return base.RoundTrip(&m.r)
	})
}}

// markedRequest is a request's copy and its marked context, allocated
// together.
type markedRequest struct {
	r   http.Request
	ctx markedContext
}

type markedContext struct{ context.Context }

type markKey struct{}

func (c *markedContext) Value(key any) any {
	if key == (markKey{}) {
		return true
	}
	return c.Context.Value(key)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// seenThrough is a middleware that tells what it wraps.
type seenThrough struct{ http.RoundTripper }

func (seenThrough) Unwrap() http.RoundTripper { return &http.Transport{} }
