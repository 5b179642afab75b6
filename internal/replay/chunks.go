// Package replay holds a request body for its retries: as chunks in
// memory that a replay reads in turn, never copying what was read before,
// and the tee that fills them while the first attempt sends the body; or,
// for a body with GetBody, the count of the bodies the transport below
// has not closed yet (open.go), which a retry waits for. It needs only the
// standard library.
package replay

import (
	"bytes"
	"io"
	"net/http"
)

// Chunks holds a request body in memory as a list of chunks, in order:
// filling it never copies what was read before, and replaying it reads the
// chunks in turn.
type Chunks [][]byte

// Size returns the number of bytes held.
func (cs Chunks) Size() int64 {
	var n int64
	for _, c := range cs {
		n += int64(len(c))
	}
	return n
}

// readAt copies into p what cs holds from off on.
func (cs Chunks) readAt(p []byte, off int64) int {
	n := 0
	for _, c := range cs {
		if off >= int64(len(c)) {
			off -= int64(len(c))
			continue
		}
		m := copy(p[n:], c[off:])
		n, off = n+m, 0
		if n == len(p) {
			break
		}
	}
	return n
}

// minChunk is the first chunk's size for a body of unknown length. Later
// ones double up to 4 KiB, then are a twelfth of what was read so far, so
// that at most 4 KiB or a twelfth of the memory is left unused, in the last
// chunk, with few chunks.
const minChunk = 512

// NewReader serves one attempt's copy of a buffered body. One chunk
// is served as io.NopCloser(*bytes.Reader), which net/http knows to be in
// memory, so that it writes a small body with the headers in one write.
func NewReader(cs Chunks) io.ReadCloser {
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
	cs  Chunks
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
