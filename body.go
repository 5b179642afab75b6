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
	bodyTee                      // the first attempt sends the body and keeps it (tee.go)
	bodyOnce                     // the body is longer than the buffer limit: one attempt only
)

// chunks holds a request body in memory as a list of chunks, in order:
// filling it never copies what was read before, and replaying it reads the
// chunks in turn.
type chunks [][]byte

// size returns the number of bytes held.
func (cs chunks) size() int64 {
	var n int64
	for _, c := range cs {
		n += int64(len(c))
	}
	return n
}

// minChunk is the first chunk's size for a body of unknown length. Later
// ones double up to 4 KiB, then are a twelfth of what was read so far, so
// that at most 4 KiB or a twelfth of the memory is left unused, in the last
// chunk, with few chunks.
const minChunk = 512

// newReplayBody serves one attempt's copy of a buffered body. One chunk
// is served as io.NopCloser(*bytes.Reader), which net/http knows to be in
// memory, so that it writes a small body with the headers in one write.
func newReplayBody(cs chunks) io.ReadCloser {
	switch len(cs) {
	case 0:
		return http.NoBody
	case 1:
		return io.NopCloser(bytes.NewReader(cs[0]))
	}
	return &chunkReader{cs: cs}
}

// chunkReader reads chunks in turn.
type chunkReader struct {
	cs  chunks
	i   int
	off int
}

// Read fills p from as many chunks as it takes, so that a chunked
// request body goes out in frames as large as the caller's buffer, not
// one per chunk (net/http flushes after each frame).
func (r *chunkReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.cs) {
		m := copy(p[n:], r.cs[r.i][r.off:])
		n += m
		r.off += m
		if r.off == len(r.cs[r.i]) {
			r.i, r.off = r.i+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (*chunkReader) Close() error { return nil }

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
