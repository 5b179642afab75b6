package replay

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Wait returns once every body Track and GetBody made is closed; Busy
// says whether one is open; a body never closed fails Wait after
// CloseWait, and a context's end ends it first.
func TestOpenWaitsForEveryClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		getBody := func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }
		var o Open
		first := o.Track(io.NopCloser(strings.NewReader("x")), getBody)
		second, _ := o.GetBody()
		if !o.Busy() {
			t.Fatal("two bodies open, Busy false")
		}
		start := time.Now()
		go func() {
			time.Sleep(10 * time.Millisecond)
			first.Close()
			first.Close() // twice: counted once
			time.Sleep(10 * time.Millisecond)
			second.Close()
		}()
		if err := o.Wait(context.Background(), time.Time{}); err != nil || time.Since(start) != 20*time.Millisecond || o.Busy() {
			t.Errorf("Wait = %v after %v, busy %v; want nil after the last close, 20ms", err, time.Since(start), o.Busy())
		}
		third, _ := o.GetBody()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := o.Wait(ctx, time.Time{}); err != context.DeadlineExceeded || time.Since(start) != 70*time.Millisecond {
			t.Errorf("Wait = %v at %v; want the context's end at 70ms", err, time.Since(start))
		}
		if err := o.Wait(context.Background(), time.Time{}); err != ErrOpen || time.Since(start) != CloseWait {
			t.Errorf("Wait = %v at %v; want ErrOpen CloseWait after the first Wait began", err, time.Since(start))
		}
		third.Close()
		var none *Open
		if none.Busy() || none.Wait(context.Background(), time.Time{}) != nil {
			t.Error("a nil Open has something open")
		}
	})
}

// A body never closed costs a request CloseWait in all, from its first
// Wait: an end that comes first fails Wait with ErrLate, a later Wait
// waits only what is left of CloseWait, and every Wait after that fails
// at once.
func TestOpenWaitsOncePerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var o Open
		o.Track(io.NopCloser(strings.NewReader("x")), nil)
		start := time.Now()
		if err := o.Wait(context.Background(), start.Add(100*time.Millisecond)); err != ErrLate || time.Since(start) != 100*time.Millisecond {
			t.Errorf("Wait = %v at %v; want ErrLate at the end given, 100ms", err, time.Since(start))
		}
		if err := o.Wait(context.Background(), time.Time{}); err != ErrOpen || time.Since(start) != CloseWait {
			t.Errorf("Wait = %v at %v; want ErrOpen CloseWait after the first Wait began", err, time.Since(start))
		}
		if err := o.Wait(context.Background(), time.Time{}); err != ErrOpen || time.Since(start) != CloseWait {
			t.Errorf("second Wait = %v at %v; want ErrOpen at once", err, time.Since(start))
		}
	})
}
