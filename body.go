// This file handles bodies: replaying a request body on every attempt
// (GetBody, or a bounded buffer), discarding a response that will be
// retried, and keeping a per-attempt context alive for the body of the
// response that is returned. The loop that uses them is in transport.go.

package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/replay"
)

// bodyMode says how the request body reaches each attempt.
type bodyMode uint8

const (
	bodyNone     bodyMode = iota // no body: every attempt sends the request as is
	bodyGetBody                  // req.GetBody makes a fresh body for each retry, no copy
	bodyBuffered                 // the whole body is in a buffer that each attempt replays
	bodyTee                      // the first attempt sends the body and keeps it (internal/replay)
	bodyOnce                     // the body is longer than the buffer limit: one attempt only
)

const (
	// maxDrain bounds what is read of a discarded response so that its
	// connection can go back to the pool; a longer body costs the
	// connection instead.
	maxDrain = 64 << 10
	// drainTimeout bounds how long a server trickling a discarded body can
	// hold the client.
	drainTimeout = time.Second
)

// discard drains a little of a response that will not be returned, and
// closes it, so that its connection is reused. A server cannot hold it for
// more than maxDrain bytes or drainTimeout: past that, the body is closed
// under the reader and the connection is dropped.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	if resp.ContentLength != 0 && resp.ContentLength <= maxDrain {
		t := time.AfterFunc(drainTimeout, func() { resp.Body.Close() })
		io.CopyN(io.Discard, resp.Body, maxDrain)
		t.Stop()
	}
	resp.Body.Close()
}

// defaultHeldBodyMemory bounds the memory that the responses kept by
// waiting retries hold, per Transport: a retry that waits, or is held by
// the breaker, keeps its last response in memory (up to 64 KiB of its
// body), so that it can return it if it gives up. Past the bound, what is
// kept is cut (see ErrHeldBodyTruncated), so that thousands of requests
// waiting behind a host that answers with large error pages cannot hold
// more than this.
const defaultHeldBodyMemory = 4 << 20

// ErrHeldBodyTruncated is what reading the body of a response ends with,
// after the bytes that were kept, when a request gave up after waiting
// and its last response's body was longer than its share of
// defaultHeldBodyMemory (64 KiB, or less while other waiting requests
// hold the rest). The status and headers are whole.
var ErrHeldBodyTruncated = errors.New("retryhttp: response body cut: a waiting retry kept only part of it")

// memPool is a Transport's bound on kept bodies.
type memPool struct{ free atomic.Int64 }

func newMemPool(n int64) *memPool {
	p := new(memPool)
	p.free.Store(n)
	return p
}

// take reserves up to n bytes and returns how many it got.
func (p *memPool) take(n int64) int64 {
	for {
		free := p.free.Load()
		got := min(n, max(free, 0))
		if got == 0 || p.free.CompareAndSwap(free, free-got) {
			return got
		}
	}
}

func (p *memPool) put(n int64) { p.free.Add(n) }

// keptBody is a kept response's body: the bytes that were kept, then
// io.EOF, or ErrHeldBodyTruncated if there were more. Closing it gives
// its memory back.
type keptBody struct {
	r    bytes.Reader
	end  error
	pool *memPool
	n    int64
	shut atomic.Bool
}

func (b *keptBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = b.end
	}
	return n, err
}

func (b *keptBody) Close() error {
	if b.shut.CompareAndSwap(false, true) {
		b.pool.put(b.n)
	}
	return nil
}

// detach reads a response that is not returned now but may be later, when
// a retry that waits gives up, into memory, within its share of pool and
// drainTimeout, and closes it so that its connection is reused. A reader
// of what it kept ends with io.EOF if it kept all of it,
// ErrHeldBodyTruncated if there was more, or the read's error.
func detach(resp *http.Response, pool *memPool) {
	if resp.Body == nil || resp.ContentLength == 0 {
		// Nothing to keep: no copy, no allocation.
		if resp.Body != nil {
			resp.Body.Close()
		}
		resp.Body = http.NoBody
		return
	}
	want := int64(maxDrain)
	if resp.ContentLength > 0 {
		want = min(want, resp.ContentLength)
	}
	got := pool.take(want)
	buf := make([]byte, got)
	t := time.AfterFunc(drainTimeout, func() { resp.Body.Close() })
	n, end := io.ReadFull(resp.Body, buf)
	switch {
	case end == io.ErrUnexpectedEOF || end == io.EOF:
		end = io.EOF // shorter than its share: all of it is kept
	case end != nil:
	case resp.ContentLength < 0 || resp.ContentLength > got:
		end = io.EOF
		var one [1]byte
		if m, _ := resp.Body.Read(one[:]); m > 0 || resp.ContentLength > got {
			end = ErrHeldBodyTruncated
		}
	default:
		end = io.EOF
	}
	t.Stop()
	resp.Body.Close()
	pool.put(got - int64(n))
	b := &keptBody{end: end, pool: pool, n: int64(n)}
	b.r.Reset(buf[:n])
	resp.Body = b
}

// cancelBody ends an attempt's context when the caller closes the body of
// the response that was returned, and not before, so that a per-attempt
// timeout never cuts the body off.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(context.Canceled)
	return err
}

// cancelBodyWriter keeps the io.Writer of a 101 Switching Protocols body.
type cancelBodyWriter struct {
	cancelBody
	io.Writer
}

func wrapCancel(body io.ReadCloser, cancel context.CancelCauseFunc) io.ReadCloser {
	if w, ok := body.(io.ReadWriteCloser); ok {
		return &cancelBodyWriter{cancelBody{body, cancel}, w}
	}
	return &cancelBody{body, cancel}
}

// bodyReplay is how the request body reaches each attempt.
type bodyReplay struct {
	mode bodyMode
	buf  replay.Chunks
	tee  *replay.Tee  // the first attempt's body, while it is being kept
	open *replay.Open // with GetBody and retries: the bodies not closed yet

	// spare is storage for the first attempt's request, which carries a
	// counted body and so is a copy: made with open, in one allocation.
	spare *http.Request
}

// counted is a request's count of open bodies and its first attempt's
// request, allocated together.
type counted struct {
	open replay.Open
	req  http.Request
}

// first decides how the request body reaches each attempt, and
// returns the first attempt's.
func (b *bodyReplay) first(req *http.Request, maxAttempts int, limit int64) io.ReadCloser {
	first := req.Body
	if req.Body == nil || req.Body == http.NoBody {
		return first
	}
	switch {
	case req.GetBody != nil:
		b.mode = bodyGetBody
		if maxAttempts > 1 {
			cnt := new(counted)
			b.open, b.spare = &cnt.open, &cnt.req
			first = b.open.Track(req.Body, req.GetBody)
		}
	case maxAttempts == 1 || req.ContentLength > limit:
		// Never retried, or too long to keep: sent once, as it is.
		b.mode = bodyOnce
	default:
		// Kept while the first attempt sends it (internal/replay).
		b.tee = replay.NewTee(req.Body, req.ContentLength, limit)
		b.mode, first = bodyTee, b.tee
	}
	return first
}

// sized passes on a body, failing one that is not the length cl > 0 that
// the request declares: no attempt can send it.
func sized(cs replay.Chunks, err error, cl int64) (replay.Chunks, error) {
	if err == nil && cl > 0 && cs.Size() != cl {
		return nil, errLengthMismatch
	}
	return cs, err
}

// next returns the body of the next attempt. A GetBody's waits for the
// last body's close until end at the latest (if not zero).
func (b *bodyReplay) next(ctx context.Context, req *http.Request, end time.Time) (io.ReadCloser, error) {
	switch b.mode {
	case bodyGetBody:
		if b.open == nil {
			return req.GetBody() // with one attempt, nothing is counted
		}
		if err := b.open.Wait(ctx, end); err != nil {
			return nil, err
		}
		return b.open.GetBody()
	case bodyBuffered:
		return replay.NewReader(b.buf), nil
	case bodyTee:
		cs, err := b.tee.Rest(ctx)
		cs, err = sized(cs, err, req.ContentLength)
		if err != nil {
			return nil, err
		}
		b.buf, b.mode = cs, bodyBuffered
		return replay.NewReader(cs), nil
	}
	return req.Body, nil
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		b.Close()
	}
}

// getBody is the GetBody of an attempt whose body is not the caller's.
func (b *bodyReplay) getBody(ctx context.Context, req *http.Request, replayable bool) func() (io.ReadCloser, error) {
	switch {
	case b.mode == bodyBuffered:
		buf := b.buf
		return func() (io.ReadCloser, error) { return replay.NewReader(buf), nil }
	case b.mode == bodyTee && !replayable:
		// net/http resends a request that is not replayable only when
		// the server cannot have processed it (nothing written on a
		// reused connection, an HTTP/2 stream refused or beyond a
		// GOAWAY), and only if it can rewind the body: let it, from
		// what the tee keeps. A replayable request is resent by the
		// loop instead, where the resend is counted.
		tee, cl := b.tee, req.ContentLength
		return func() (io.ReadCloser, error) {
			cs, err := tee.Rewind(ctx)
			cs, err = sized(cs, err, cl)
			if err != nil {
				return nil, err
			}
			return replay.NewReader(cs), nil
		}
	case b.open != nil:
		// net/http calls it to resend a request that the server cannot
		// have processed; the body it makes is counted too.
		return b.open.GetBody
	}
	return req.GetBody
}

// nextBody is the body of a retry that waits delay once it has it, of a
// request with a body (retry sends one without as is). A GetBody's waits
// for the last body's close until the request's end (its context's
// deadline or WithMaxElapsed) less delay at the latest, if it has one.
func (k *call) nextBody(delay time.Duration) (io.ReadCloser, error) {
	end := k.end()
	if !end.IsZero() {
		end = end.Add(-delay)
	}
	return k.body.next(k.ctx, k.req, end)
}

// end is when the request must have ended: the sooner of its context's
// deadline and WithMaxElapsed's end, zero if neither.
func (k *call) end() time.Time {
	if k.ctxEnd.IsZero() || (!k.elapsedEnd.IsZero() && k.elapsedEnd.Before(k.ctxEnd)) {
		return k.elapsedEnd
	}
	return k.ctxEnd
}

// bodyFailed is why a retry whose body could not be had gives up: the
// request's end came while the last body was open (WithMaxElapsed's, or
// its context's deadline), or GetBody failed, or the base never closed
// the last body.
func (k *call) bodyFailed(err error) GiveUpReason {
	switch {
	case !errors.Is(err, replay.ErrLate):
		return GiveUpBody
	case !k.elapsedEnd.IsZero() && k.elapsedEnd.Equal(k.end()):
		return GiveUpMaxElapsed
	}
	return GiveUpDeadline
}
