// This file holds Open: the count of the request bodies a GetBody made
// that the transport below has not closed yet. RoundTrip may return
// before net/http is done with a body: it reads on to EOF to check the
// declared length, then closes it, on its own goroutine. A GetBody may
// rewind one shared reader instead of making a new one (azcore's seeks its
// io.ReadSeeker back to 0), and calling it then would race that read and
// send a short body. http.RoundTripper's contract is that a caller who
// sends a body again waits for its Close; Wait does.

package replay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// CloseWait bounds how long a request waits for its bodies' close, in
// all, from its first wait: net/http closes a body at once, or within 50 ms of the response's
// body being closed when the server answered before reading all of it. A
// base that never closes it breaks http.RoundTripper's contract.
const CloseWait = time.Second

var (
	// ErrOpen is Wait's error when a body was not closed within
	// CloseWait; every later Wait of the request fails with it at once.
	ErrOpen = errors.New("retryhttp: the transport did not close the last attempt's request body")
	// ErrLate is Wait's error when a body was still open at the end the
	// caller gave Wait.
	ErrLate = errors.New("retryhttp: the last attempt's request body was still open at the request's time limit")
)

// Open counts the bodies made for one request. A nil *Open has nothing
// open. Its zero value is made ready by Track.
type Open struct {
	// GetBody is the request's GetBody, with the bodies it makes counted:
	// the retries' and net/http's own resends.
	GetBody func() (io.ReadCloser, error)

	mu     sync.Mutex
	n      int
	idle   chan struct{} // made by a waiter, closed when n drops to 0
	until  time.Time     // the first Wait's start plus CloseWait: no Wait goes past it
	broken bool          // a Wait ran out of CloseWait: the base never closes
	first  tracked       // the first attempt's, in the same allocation
}

// tracked is an attempt's body, counted in Open until closed.
type tracked struct {
	io.ReadCloser
	o    *Open
	shut atomic.Bool
}

func (b *tracked) Close() error {
	err := b.ReadCloser.Close()
	if b.shut.CompareAndSwap(false, true) {
		b.o.closed()
	}
	return err
}

// Track starts counting, in o, the bodies of a request whose body is body
// and whose GetBody is getBody, and returns the first attempt's body.
func (o *Open) Track(body io.ReadCloser, getBody func() (io.ReadCloser, error)) io.ReadCloser {
	o.n = 1
	o.first = tracked{ReadCloser: body, o: o}
	o.GetBody = func() (io.ReadCloser, error) {
		rc, err := getBody()
		if err != nil || rc == nil || rc == http.NoBody {
			return rc, err
		}
		return o.track(rc), nil
	}
	return &o.first
}

func (o *Open) track(rc io.ReadCloser) io.ReadCloser {
	o.mu.Lock()
	o.n++
	o.mu.Unlock()
	return &tracked{ReadCloser: rc, o: o}
}

func (o *Open) closed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n--; o.n == 0 && o.idle != nil {
		close(o.idle)
		o.idle = nil
	}
}

// Busy reports whether a body is still open, without waiting.
func (o *Open) Busy() bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n > 0
}

// Wait returns when every body counted is closed: at once, almost always.
// It fails at ctx's end; with ErrLate at end, if end is not zero and comes
// first; or with ErrOpen once CloseWait has passed since the request's
// first Wait began, and then at once ever after: however many places of a
// request need its body, and however many retries it makes, its waits
// for a base that does not close come to CloseWait in all.
func (o *Open) Wait(ctx context.Context, end time.Time) error {
	if o == nil {
		return nil
	}
	idle, until, err := o.waiter()
	if idle == nil {
		return err
	}
	d, late := time.Until(until), false
	if !end.IsZero() && end.Before(until) {
		d, late = time.Until(end), true
	}
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
	}
	if late {
		return ErrLate
	}
	o.mu.Lock()
	o.broken = true
	o.mu.Unlock()
	return ErrOpen
}

// waiter returns the channel closed when nothing is open and the time no
// Wait goes past, or nil and Wait's answer when there is nothing to wait
// for. The clock is read only by a request that has to wait.
func (o *Open) waiter() (chan struct{}, time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.n == 0:
		return nil, time.Time{}, nil
	case o.broken:
		return nil, time.Time{}, ErrOpen
	case o.idle == nil:
		o.idle = make(chan struct{})
	}
	if o.until.IsZero() {
		o.until = time.Now().Add(CloseWait)
	}
	return o.idle, o.until, nil
}
