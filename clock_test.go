package retryhttp

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock replaces real time in tests: Sleep returns at once (unless the
// context is already done), records the wait and moves Now on by it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Second() int64 { return c.Now().Unix() }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// realClock.Second counts from the monotonic clock: it must still agree
// with the wall clock's second.
func TestRealClockSecond(t *testing.T) {
	before := time.Now().Unix()
	s := realClock{}.Second()
	after := time.Now().Unix()
	if s < before-1 || s > after+1 {
		t.Errorf("Second() = %d, wall clock between %d and %d", s, before, after)
	}
}
