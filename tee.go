// This file holds the tee: a request body without GetBody is captured
// while the first attempt sends it, instead of being read whole before it,
// so that the first byte leaves at once, a full-duplex exchange works, and
// the request's context governs the sending as it does without retries.
// Only a retry needs the whole body: it then waits for the first attempt
// to be done with it and reads the rest, if any. body.go holds the chunks
// that the capture fills and the replays read.

package retryhttp

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
)

// teeBody is the first attempt's body: it reads the caller's body and
// keeps what it reads, up to limit bytes, for the retries.
type teeBody struct {
	src   io.ReadCloser
	limit int64

	// reading is held (a token in it) while src is being read, by the
	// base's Read or by rest, so that they never read it at once; mu
	// guards the rest and is never held while src is read.
	reading  chan struct{}
	mu       sync.Mutex
	cs       chunks
	total    int64 // bytes read from src
	kept     int64 // bytes kept in cs
	over     bool  // more than limit was read: nothing is kept
	eof      bool  // src is read to its end (or failed)
	srcErr   error // what ended src, if not io.EOF
	final    bool  // the request is over: src is closed when the base is done
	srcShut  bool
	baseDone bool          // the base closed the tee
	done     chan struct{} // closed when the base closes the tee
}

func newTeeBody(src io.ReadCloser, contentLength, limit int64) *teeBody {
	t := &teeBody{src: src, limit: limit, done: make(chan struct{}), reading: make(chan struct{}, 1)}
	if contentLength > 0 {
		t.cs = make(chunks, 0, 1)
		t.cs = append(t.cs, make([]byte, 0, contentLength))
	}
	return t
}

func (t *teeBody) Read(p []byte) (int, error) {
	t.reading <- struct{}{}
	defer func() { <-t.reading }()
	t.mu.Lock()
	eof, srcErr := t.eof, t.srcErr
	t.mu.Unlock()
	if eof {
		if srcErr != nil {
			return 0, srcErr
		}
		return 0, io.EOF
	}
	n, err := t.src.Read(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.keep(p[:n])
	if err != nil {
		t.ended(err)
	}
	return n, err
}

// keep appends b to the capture, into the spare room of the last chunk
// and then into new ones that grow as bufferBody's do; t.mu is held.
func (t *teeBody) keep(b []byte) {
	t.total += int64(len(b))
	if t.over {
		return
	}
	if t.total > t.limit {
		t.over, t.cs = true, nil
		return
	}
	for len(b) > 0 {
		if len(t.cs) == 0 || len(t.cs[len(t.cs)-1]) == cap(t.cs[len(t.cs)-1]) {
			size := max(minChunk, min(t.kept, 4<<10), t.kept/12)
			t.cs = append(t.cs, slices.Grow([]byte(nil), int(size)))
		}
		last := &t.cs[len(t.cs)-1]
		m := min(len(b), cap(*last)-len(*last))
		*last = append(*last, b[:m]...)
		b = b[m:]
		t.kept += int64(m)
	}
}

// ended records the end of src; t.mu is held.
func (t *teeBody) ended(err error) {
	t.eof = true
	if err != io.EOF {
		t.srcErr = err
	}
	t.shut()
}

// shut closes src once; t.mu is held.
func (t *teeBody) shut() {
	if !t.srcShut {
		t.srcShut = true
		t.src.Close()
	}
}

// Close is the base's: it is done with the body. The caller's body is
// closed now if the request is over or it was read to its end; otherwise
// it stays open for a retry to read the rest.
func (t *teeBody) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.baseDone {
		return nil
	}
	t.baseDone = true
	if t.final || t.eof {
		t.shut()
	}
	close(t.done)
	return nil
}

// release ends the request: the caller's body is closed as soon as the base
// is done with it.
func (t *teeBody) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.final = true
	if t.baseDone || t.eof {
		t.shut()
	}
}

// rewind is the GetBody of the tee's attempt, for the base: the whole body
// once the base has closed the tee (net/http closes a body before it asks
// for a fresh one). A base that asks earlier, while the tee is open, gets
// errTeeOpen at once rather than a wait for a Close that it would never
// make.
func (t *teeBody) rewind(ctx context.Context) (chunks, error) {
	t.mu.Lock()
	open := !t.baseDone
	t.mu.Unlock()
	if open {
		return nil, errTeeOpen
	}
	return t.rest(ctx)
}

// errTeeOpen is what rewind reports while the base still holds the tee.
var errTeeOpen = errors.New("retryhttp: GetBody called before the request body was closed; a body without GetBody can be had again only once the first is done with")

// errTooLong is what rest reports for a body longer than the limit.
var errTooLong = errors.New("retryhttp: request body longer than the buffer limit")

// rest returns the whole body for a retry: it waits, within ctx, until the
// base is done with the first attempt's body, then reads what the base
// did not, up to the limit. It fails for a body longer than the limit, or
// one that could not be read.
func (t *teeBody) rest(ctx context.Context) (chunks, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select { // a Read of the base's may still be under way
	case t.reading <- struct{}{}:
		defer func() { <-t.reading }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var buf []byte
	for empty := 0; ; {
		t.mu.Lock()
		more := !t.eof && !t.over
		t.mu.Unlock()
		if !more {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if buf == nil {
			buf = make([]byte, 32<<10)
		}
		n, err := t.src.Read(buf)
		t.mu.Lock()
		t.keep(buf[:n])
		if err != nil {
			t.ended(err)
		}
		if n > 0 {
			empty = 0
		} else if empty++; empty > 100 {
			t.ended(io.ErrNoProgress)
		}
		t.mu.Unlock()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.over:
		t.shut()
		return nil, errTooLong
	case t.srcErr != nil:
		return nil, t.srcErr
	}
	return t.cs, nil
}
