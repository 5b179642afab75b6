// This file holds the tee: a request body without GetBody is captured
// while the first attempt sends it, instead of being read whole before it,
// so that the first byte leaves at once, a full-duplex exchange works, and
// the request's context governs the sending as it does without retries.
// Only a retry needs the whole body: it then waits for the first attempt
// to be done with it and reads the rest, if any. chunks.go holds the Chunks
// that the capture fills and the replays read.

package replay

import (
	"cmp"
	"context"
	"errors"
	"io"
	"sync"
)

// Tee is the first attempt's body: it reads the caller's body and
// keeps what it reads, up to limit bytes, for the retries.
type Tee struct {
	src   io.ReadCloser
	limit int64

	// reading is held (a token in it) while src is being read, by the
	// base's Read or by rest, so that they never read it at once; mu
	// guards the rest and is never held while src is read.
	reading  chan struct{}
	mu       sync.Mutex
	cs       Chunks
	total    int64 // bytes read from src
	kept     int64 // bytes kept in cs
	served   int64 // bytes handed to the base: less than total after a read-ahead
	declared int64 // the request's Content-Length, if > 0
	over     bool  // more than limit was read: nothing is kept for a retry
	eof      bool  // src is read to its end (or failed)
	srcErr   error // what ended src, if not io.EOF
	final    bool  // the request is over: src is closed when the base is done
	srcShut  bool
	baseDone bool          // the base closed the tee
	done     chan struct{} // closed when the base closes the tee
}

// NewTee keeps src as it is read. Nothing is allocated ahead of what
// arrives: a declared length only caps the chunks' growth.
func NewTee(src io.ReadCloser, contentLength, limit int64) *Tee {
	return &Tee{src: src, limit: limit, declared: max(contentLength, 0),
		done: make(chan struct{}), reading: make(chan struct{}, 1)}
}

func (t *Tee) Read(p []byte) (int, error) {
	t.reading <- struct{}{}
	defer func() { <-t.reading }()
	t.mu.Lock()
	if t.served < t.total {
		// Read ahead by an early GetBody: served from the capture.
		n := t.cs.readAt(p, t.served)
		t.served += int64(n)
		if t.over && t.served == t.total {
			t.cs = nil // kept for the base only
		}
		t.mu.Unlock()
		return n, nil
	}
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
	t.keep(p[:n], false)
	t.served += int64(n)
	if err != nil {
		t.ended(err)
	}
	return n, err
}

// keep appends b to the capture, into the spare room of the last chunk
// and then into new ones that grow as bufferBody's do; t.mu is held.
// Bytes read ahead for the base (ahead) are kept even past the limit,
// until the base has read them, but no longer for a retry.
func (t *Tee) keep(b []byte, ahead bool) {
	t.total += int64(len(b))
	switch {
	case t.over && !ahead:
		return
	case t.total > t.limit && !ahead:
		t.over, t.cs = true, nil
		return
	case t.total > t.limit:
		t.over = true
	}
	for len(b) > 0 {
		if len(t.cs) == 0 || len(t.cs[len(t.cs)-1]) == cap(t.cs[len(t.cs)-1]) {
			size := max(minChunk, min(t.kept, 4<<10), t.kept/12)
			if t.declared > t.kept {
				// A declared length: Chunks double, up to what is left of
				// it, so that no more is allocated than twice what came.
				size = min(max(minChunk, t.kept), t.declared-t.kept)
			}
			t.cs = append(t.cs, make([]byte, 0, size))
		}
		last := &t.cs[len(t.cs)-1]
		m := min(len(b), cap(*last)-len(*last))
		*last = append(*last, b[:m]...)
		b = b[m:]
		t.kept += int64(m)
	}
}

// ended records the end of src; t.mu is held.
func (t *Tee) ended(err error) {
	t.eof = true
	if err != io.EOF {
		t.srcErr = err
	}
	t.shut()
}

// shut closes src once; t.mu is held.
func (t *Tee) shut() {
	if !t.srcShut {
		t.srcShut = true
		t.src.Close()
	}
}

// Close is the base's: it is done with the body. The caller's body is
// closed now if the request is over or it was read to its end; otherwise
// it stays open for a retry to read the rest.
func (t *Tee) Close() error {
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

// Release ends the request: the caller's body is closed as soon as the base
// is done with it.
func (t *Tee) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.final = true
	if t.baseDone || t.eof {
		t.shut()
	}
}

// Rewind is the GetBody of the tee's attempt, for the base: the whole body
// once the base has closed the tee (net/http closes a body before it asks
// for a fresh one). A base that asks earlier, while the tee is open (a
// request signer that hashes the body before sending it), has the rest of
// the body read ahead, within the limit, into the capture; the base's own
// Reads are then served from it.
func (t *Tee) Rewind(ctx context.Context) (Chunks, error) {
	t.mu.Lock()
	open := !t.baseDone
	t.mu.Unlock()
	if open {
		return t.ahead(ctx)
	}
	return t.Rest(ctx)
}

// ahead reads the rest of src into the capture, up to the limit, for an
// early GetBody.
func (t *Tee) ahead(ctx context.Context) (Chunks, error) {
	if !t.take(ctx) {
		return nil, ctx.Err()
	}
	if err := t.fill(ctx, true); err != nil {
		return nil, err // the token stays with the read that ctx abandoned
	}
	defer func() { <-t.reading }()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.over:
		return nil, ErrTooLong
	case t.srcErr != nil:
		return nil, t.srcErr
	}
	return t.cs, nil
}

// take takes the reading token, within ctx.
func (t *Tee) take(ctx context.Context) bool {
	select {
	case t.reading <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// fill reads src to its end, or past the limit, into the capture; the
// reading token is held. Each Read of src runs within ctx: if ctx ends
// first, fill returns its error at once and leaves the Read to finish
// (and give the token back) on its own.
func (t *Tee) fill(ctx context.Context, ahead bool) error {
	buf := make([]byte, 32<<10)
	for empty := 0; ; {
		t.mu.Lock()
		more := !t.eof && !t.over
		t.mu.Unlock()
		if !more {
			return nil
		}
		if err := ctx.Err(); err != nil {
			<-t.reading
			return err
		}
		r, ok := t.readOnce(ctx, buf)
		if !ok {
			return ctx.Err()
		}
		t.mu.Lock()
		t.keep(buf[:r.n], ahead)
		if r.err != nil {
			t.ended(r.err)
		}
		if r.n > 0 {
			empty = 0
		} else if empty++; empty > 100 {
			t.ended(io.ErrNoProgress)
		}
		t.mu.Unlock()
	}
}

// read is what one Read of the source returned.
type read struct {
	n   int
	err error
}

// readOnce reads the source once into buf, on a goroutine of its own so
// that ctx can end the wait; ok is false if ctx ended first: the read,
// when it returns, is kept then, and ends the body.
func (t *Tee) readOnce(ctx context.Context, buf []byte) (r read, ok bool) {
	done := make(chan read, 1)
	go func() {
		n, err := t.src.Read(buf)
		done <- read{n, err}
	}()
	select {
	case r = <-done:
		return r, true
	case <-ctx.Done():
		go func() {
			r := <-done
			t.mu.Lock()
			t.keep(buf[:r.n], false)
			t.ended(cmp.Or(r.err, ctx.Err()))
			t.mu.Unlock()
			<-t.reading
		}()
		return read{}, false
	}
}

// ErrTooLong is what rest reports for a body longer than the limit.
var ErrTooLong = errors.New("retryhttp: request body longer than the buffer limit")

// Rest returns the whole body for a retry: it waits, within ctx, until the
// base is done with the first attempt's body, then reads what the base
// did not, up to the limit, each Read within ctx. It fails for a body
// longer than the limit, or one that could not be read.
func (t *Tee) Rest(ctx context.Context) (Chunks, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !t.take(ctx) { // a Read of the base's may still be under way
		return nil, ctx.Err()
	}
	if err := t.fill(ctx, false); err != nil {
		return nil, err
	}
	defer func() { <-t.reading }()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.over:
		t.shut()
		return nil, ErrTooLong
	case t.srcErr != nil:
		return nil, t.srcErr
	}
	return t.cs, nil
}
