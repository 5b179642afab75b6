package retryhttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// slowBody yields one byte every interval, n times.
type slowBody struct {
	n        int
	interval time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.interval)
	b.n--
	p[0] = 'x'
	return 1, nil
}

// A body without GetBody that trickles in is sent as it comes, under the
// request's context: a deadline ends the request on time, not after the
// whole body was read.
func TestTeeStreamingBodyHonoursDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	tr := New(srv.Client().Transport)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "PUT", srv.URL, &slowBody{n: 150, interval: 10 * time.Millisecond})
	start := time.Now()
	_, err := tr.RoundTrip(req)
	if elapsed := time.Since(start); err == nil || elapsed > time.Second {
		t.Errorf("RoundTrip = %v after %v; want the deadline's error, well before the body's 1.5s", err, elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v is not the context's deadline", err)
	}
}

// A full-duplex exchange: the server answers while the body is still
// coming, and the client writes the rest of the body only after it has the
// answer. Reading the whole body before sending would deadlock.
func TestTeeFullDuplex(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		br := bufio.NewReader(r.Body)
		line, _ := br.ReadString('\n')
		io.WriteString(w, "ack "+line)
		w.(http.Flusher).Flush()
		rest, _ := io.ReadAll(br)
		io.WriteString(w, "rest "+string(rest))
	}))
	defer srv.Close()
	tr := New(srv.Client().Transport)
	defer tr.CloseIdleConnections()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "PUT", srv.URL, pr)
	go io.WriteString(pw, "hello\n")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v (deadlocked until the deadline?)", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, _ := br.ReadString('\n')
	io.WriteString(pw, "world")
	pw.Close()
	rest, _ := io.ReadAll(br)
	if first != "ack hello\n" || string(rest) != "rest world" {
		t.Errorf("answers %q, %q; want %q, %q", first, rest, "ack hello\n", "rest world")
	}
}

// A retry after a first attempt that read only part of the body sends the
// whole body: what the first attempt read, then the rest from the caller.
func TestTeeRetryAfterPartialRead(t *testing.T) {
	var bodies []string
	n := 0
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		n++
		if n == 1 {
			b := make([]byte, 3)
			io.ReadFull(r.Body, b) // an early answer: the rest is not read
			r.Body.Close()
			bodies = append(bodies, string(b))
			return respond(503), nil
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		bodies = append(bodies, string(b))
		return respond(200), nil
	})
	tr, _ := testTransport(base, WithBackoff(Constant(0)))
	body := &opaqueBody{r: strings.NewReader("hello, world")}
	resp, err := tr.RoundTrip(newRequest(t, "PUT", "http://h/", body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("RoundTrip = %v, %v", resp, err)
	}
	if len(bodies) != 2 || bodies[0] != "hel" || bodies[1] != "hello, world" || !body.closed.Load() {
		t.Errorf("bodies %q, caller's closed %v; want [hel, hello, world], closed", bodies, body.closed.Load())
	}
}

// A bare POST without GetBody is sent with a GetBody of retryhttp's, so
// that net/http can resend it when the server did not process it: once the
// base has closed the first body, GetBody gives the whole body, the part
// the base read and the rest; before that (a signer hashing the body), it
// reads the body ahead, and the base's own reads still get all of it.
func TestTeeGetBody(t *testing.T) {
	var early error
	var earlyBody []byte
	var got []string
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.GetBody == nil {
			t.Fatal("a tee'd bare POST has no GetBody")
		}
		var eb io.ReadCloser
		if eb, early = r.GetBody(); early == nil {
			earlyBody, _ = io.ReadAll(eb)
		}
		b := make([]byte, 5)
		io.ReadFull(r.Body, b) // a refused stream: part was sent
		r.Body.Close()
		again, err := r.GetBody()
		if err != nil {
			return nil, err
		}
		all, _ := io.ReadAll(again)
		got = append(got, string(b), string(all))
		return respond(200), nil
	})
	tr, _ := testTransport(base)
	resp, err := tr.RoundTrip(newRequest(t, "POST", "http://h/", &opaqueBody{r: strings.NewReader("hello, world")}))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if early != nil || string(earlyBody) != "hello, world" {
		t.Errorf("GetBody while the body is open: %q, %v; want the whole body", earlyBody, early)
	}
	if len(got) != 2 || got[0] != "hello" || got[1] != "hello, world" {
		t.Errorf("sent %q, then GetBody gave %q; want hello, then the whole body", got[0], got[1:])
	}

	// A keyed request is resent by retryhttp, counted: no GetBody for net/http.
	keyed := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.GetBody != nil {
			t.Error("a keyed POST without GetBody is given one")
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return respond(200), nil
	})
	tr, _ = testTransport(keyed, WithIdempotencyKeys())
	resp, err = tr.RoundTrip(newRequest(t, "POST", "http://h/", &opaqueBody{r: strings.NewReader("x")}))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// Over the buffer limit, the base's GetBody fails, and the call gives up
// for the body: nothing is sent twice.
func TestTeeGetBodyOverLimit(t *testing.T) {
	sent := 0
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if _, err := r.GetBody(); err != nil {
			return nil, err // as net/http does when it cannot rewind
		}
		return respond(200), nil
	})
	tr, _ := testTransport(base, WithBodyBufferLimit(4))
	_, err := tr.RoundTrip(newRequest(t, "POST", "http://h/", &opaqueBody{r: strings.NewReader("hello, world")}))
	var re *Error
	if !errors.As(err, &re) || re.Reason != GiveUpBody || sent != 1 {
		t.Fatalf("%v after %d sends, want a give-up for the body after 1", err, sent)
	}
}

// A signer below retryhttp hashes the body (GetBody) before it sends it:
// an unkeyed POST without GetBody works as it does over a bare transport.
func TestTeeEarlyGetBodyForSigner(t *testing.T) {
	var hashed, sent string
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		b, err := r.GetBody()
		if err != nil {
			return nil, err
		}
		h, _ := io.ReadAll(b)
		s, _ := io.ReadAll(r.Body)
		r.Body.Close()
		hashed, sent = string(h), string(s)
		return respond(200), nil
	})
	tr, _ := testTransport(base)
	body := strings.Repeat("payload ", 10000)
	resp, err := tr.RoundTrip(newRequest(t, "POST", "http://h/", &opaqueBody{r: strings.NewReader(body)}))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hashed != body || sent != body {
		t.Errorf("signer saw %d bytes, base sent %d; want %d both", len(hashed), len(sent), len(body))
	}
}

// A body that declares a huge length is not allocated ahead, and no limit
// panics: WithBodyBufferLimit(math.MaxInt64) with a 512 TiB declared body
// that sends 3 bytes.
func TestTeeDeclaredLengthNotAllocated(t *testing.T) {
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return respond(200), nil
	})
	tr, _ := testTransport(base, WithBodyBufferLimit(math.MaxInt64))
	req := newRequest(t, "POST", "http://h/", &opaqueBody{r: strings.NewReader("abc")})
	req.ContentLength = 512 << 40
	req.Header.Set(HeaderIdempotencyKey, "k")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	runtime.ReadMemStats(&ms)
	if grown := ms.TotalAlloc - before; grown > 1<<20 {
		t.Errorf("%d bytes allocated for a 3-byte body declaring 512 TiB", grown)
	}
}

// When the base closes the body early, the retry reads the rest of the
// caller's body within the request's context: a body that stalls does not
// hold RoundTrip past its deadline.
func TestTeeRestHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		stop := make(chan struct{})
		go func() {
			pw.Write([]byte("he"))
			<-stop // stalls
			pw.Close()
		}()
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			b := make([]byte, 2)
			io.ReadFull(r.Body, b)
			r.Body.Close() // early: the rest is the retry's to read
			return respond(503), nil
		})
		tr, _ := testTransport(base)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req := newRequest(t, "PUT", "http://h/", pr).WithContext(ctx)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("RoundTrip returned after %v, past its 200ms deadline", d)
		}
		close(stop)
		pr.Close()
	})
}
