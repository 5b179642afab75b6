package retryhttp

import (
	"testing"
	"time"
)

func TestBound(t *testing.T) {
	tests := []struct {
		base, max time.Duration
		retry     int
		want      time.Duration
	}{
		{time.Second, 10 * time.Second, 1, 2 * time.Second},
		{time.Second, 10 * time.Second, 2, 4 * time.Second},
		{time.Second, 10 * time.Second, 3, 8 * time.Second},
		{time.Second, 10 * time.Second, 4, 10 * time.Second},
		{200 * time.Millisecond, 10 * time.Second, 1, 400 * time.Millisecond}, // the design's first retry: 0 to 400ms
		{time.Second, 10 * time.Second, 1000, 10 * time.Second},
		{time.Nanosecond, 1<<63 - 1, 70, 1<<63 - 1},
		{0, time.Second, 3, 0},
	}
	for _, tt := range tests {
		if got := bound(tt.base, tt.max, tt.retry); got != tt.want {
			t.Errorf("bound(%v, %v, %d) = %v, want %v", tt.base, tt.max, tt.retry, got, tt.want)
		}
	}
}

func TestJitterRanges(t *testing.T) {
	base, max := 100*time.Millisecond, 2*time.Second
	tests := []struct {
		name string
		b    Backoff
		lo   func(n int) time.Duration
		hi   func(n int) time.Duration
	}{
		{"FullJitter", FullJitter(base, max), func(int) time.Duration { return 0 }, func(n int) time.Duration { return bound(base, max, n) }},
		{"EqualJitter", EqualJitter(base, max), func(n int) time.Duration { return bound(base, max, n) / 2 }, func(n int) time.Duration { return bound(base, max, n) }},
		{"Exponential", Exponential(base, max), func(n int) time.Duration { return bound(base, max, n) }, func(n int) time.Duration { return bound(base, max, n) }},
		{"Constant", Constant(base), func(int) time.Duration { return base }, func(int) time.Duration { return base }},
	}
	for _, tt := range tests {
		for n := 1; n <= 8; n++ {
			var seenLow, seenHigh bool
			lo, hi := tt.lo(n), tt.hi(n)
			for range 2000 {
				d := tt.b.Delay(n, 0)
				if d < lo || d > hi {
					t.Fatalf("%s.Delay(%d) = %v, want in [%v, %v]", tt.name, n, d, lo, hi)
				}
				seenLow = seenLow || d < lo+(hi-lo)/4
				seenHigh = seenHigh || d > hi-(hi-lo)/4
			}
			if lo != hi && (!seenLow || !seenHigh) {
				t.Errorf("%s.Delay(%d): 2000 draws did not cover [%v, %v]", tt.name, n, lo, hi)
			}
		}
	}
}

func TestDecorrelatedJitter(t *testing.T) {
	base, hiCap := 100*time.Millisecond, time.Second
	b := DecorrelatedJitter(base, hiCap)
	prev := time.Duration(0)
	for n := 1; n <= 50; n++ {
		d := b.Delay(n, prev)
		hi := min(hiCap, 3*max(prev, base))
		if d < base || d > hi {
			t.Fatalf("Delay(%d, %v) = %v, want in [%v, %v]", n, prev, d, base, hi)
		}
		prev = d
	}
	// Shared between requests, it keeps no state: the same prev, the same range.
	for range 1000 {
		if d := b.Delay(1, 0); d > 3*base {
			t.Fatalf("Delay(1, 0) = %v after other calls, want <= %v", d, 3*base)
		}
	}
}

func TestFullJitterZero(t *testing.T) {
	if d := FullJitter(0, 0).Delay(3, 0); d != 0 {
		t.Errorf("FullJitter(0, 0).Delay(3) = %v, want 0", d)
	}
}
