// This file handles bodies: replaying a request body on every attempt
// (GetBody, or a bounded buffer), discarding a response that will be
// retried, and keeping a per-attempt context alive for the body of the
// response that is returned. The loop that uses them is in transport.go.

package retryhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"
)

// bodyMode says how the request body reaches each attempt.
type bodyMode uint8

const (
	bodyNone     bodyMode = iota // no body: every attempt sends the request as is
	bodyGetBody                  // req.GetBody makes a fresh body for each retry, no copy
	bodyBuffered                 // the whole body is in a buffer that each attempt replays
	bodyOnce                     // the body is longer than the buffer limit: one attempt only
)

// bufferBody reads up to limit+1 bytes of body, so that it can tell a body
// that fits from one that does not. All is true when it read the whole body
// and closed it; otherwise buf holds what was read and the rest is still in
// body. A body of declared length is read into one allocation of exactly
// that size.
func bufferBody(body io.ReadCloser, contentLength, limit int64) (buf []byte, all bool, err error) {
	if contentLength > 0 && contentLength <= limit {
		buf = make([]byte, contentLength)
		n, err := readFull(body, buf)
		if err == io.EOF { // shorter than declared
			body.Close()
			return buf[:n], true, nil
		}
		if err != nil {
			body.Close()
			return nil, false, err
		}
		// Make sure it ends where it says, without growing the buffer.
		var probe [1]byte
		m, err := readFull(body, probe[:])
		switch {
		case m > 0: // longer than declared
			return append(buf, probe[0]), false, nil
		case err == io.EOF:
			body.Close()
			return buf, true, nil
		default:
			body.Close()
			return nil, false, err
		}
	}
	buf = make([]byte, 0, min(512, limit+1))
	for {
		if int64(len(buf)) > limit {
			return buf, false, nil
		}
		if len(buf) == cap(buf) {
			grown := min(int64(cap(buf))*2, limit+1)
			buf = append(buf[:cap(buf)], make([]byte, grown-int64(cap(buf)))...)[:len(buf)]
		}
		n, rerr := readFull(body, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF && int64(len(buf)) > limit {
			// Over the limit with its last bytes: sent once, and
			// the body is still the caller's to close.
			return buf, false, nil
		}
		if rerr == io.EOF {
			body.Close()
			return buf, true, nil
		}
		if rerr != nil {
			body.Close()
			return nil, false, rerr
		}
	}
}

// readFull is io.ReadFull that reports a body that ends early as io.EOF
// and gives up on a reader that keeps returning nothing.
func readFull(r io.Reader, p []byte) (int, error) {
	n, empty := 0, 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
		if m == 0 {
			if empty++; empty > 100 {
				return n, io.ErrNoProgress
			}
		}
	}
	return n, nil
}

// replayBody serves one attempt's copy of a buffered body.
type replayBody struct{ bytes.Reader }

func (*replayBody) Close() error { return nil }

func newReplayBody(buf []byte) io.ReadCloser {
	b := new(replayBody)
	b.Reset(buf)
	return b
}

// onceBody sends a body too long to buffer: the part already read, then the
// rest of the caller's body, which it closes.
type onceBody struct {
	io.Reader
	io.Closer
}

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

// detach reads a response that is not returned now but may be later, when
// a retry held by the breaker gives up, into memory, and closes it so that
// its connection is reused. It reports whether the whole body fit in
// maxDrain bytes; if not, the response is closed and lost.
func detach(resp *http.Response) bool {
	if resp.Body == nil || resp.ContentLength > maxDrain {
		discard(resp)
		return false
	}
	if resp.ContentLength == 0 {
		// Nothing to keep: no copy, no allocation.
		resp.Body.Close()
		resp.Body = http.NoBody
		return true
	}
	t := time.AfterFunc(drainTimeout, func() { resp.Body.Close() })
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxDrain+1))
	t.Stop()
	resp.Body.Close()
	if err != nil || len(buf) > maxDrain {
		return false
	}
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	return true
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
