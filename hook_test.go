package retryhttp

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// hookLog records what an attempt hook is told, and when.
type hookLog struct {
	mu     sync.Mutex
	start  time.Time
	events []string
	ends   []AttemptEnd
	called []time.Duration // when each end was reported, after start
}

func (h *hookLog) option() Option {
	return WithAttemptHook(func(ctx context.Context, a AttemptStart) (context.Context, func(AttemptEnd)) {
		h.add(fmt.Sprintf("start %d", a.Attempt))
		return ctx, func(e AttemptEnd) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, fmt.Sprintf("end %d retried=%v giveup=%q", a.Attempt, e.Retried, e.GiveUp))
			h.ends = append(h.ends, e)
			h.called = append(h.called, time.Since(h.start))
		}
	})
}

func (h *hookLog) add(s string) {
	h.mu.Lock()
	h.events = append(h.events, s)
	h.mu.Unlock()
}

func (h *hookLog) check(t *testing.T, want ...string) {
	t.Helper()
	if got := fmt.Sprint(h.events); got != fmt.Sprint(want) {
		t.Errorf("hook saw %s, want %s", got, want)
	}
}

// A retried attempt is reported as Retried when its retry goes, after the
// wait, with the wait it had and the time the attempt itself ended, so
// that a span ends with the attempt, not with the wait.
func TestHookRetriedAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hookLog{start: time.Now()}
		tr := New(&perRequest{codes: []int{503}}, WithBackoff(Constant(100*time.Millisecond)), h.option())
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
		}
		h.check(t, "start 1", "end 1 retried=true giveup=\"\"", "start 2", "end 2 retried=false giveup=\"\"")
		if e := h.ends[0]; e.NextDelay != 100*time.Millisecond || !e.End.Equal(h.start) || h.called[0] != 100*time.Millisecond ||
			e.Outcome != "503" || e.Response == nil || e.Response.StatusCode != 503 {
			t.Errorf("first end = %+v, reported at %v; want NextDelay 100ms, End at the start (the attempt took no time), reported at 100ms, outcome 503 with its response",
				e, h.called[0])
		}
	})
}

// A retry that the breaker holds and that gives up in the hold is
// reported with its reason, not as Retried: no attempt follows.
func TestHookHeldRetryGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hookLog{start: time.Now()}
		tr := New(&perRequest{codes: []int{503, 503}}, WithBackoff(Constant(10*time.Millisecond)),
			WithRetryBreaker(BreakerConfig{MaxHold: time.Hour, ProbeBackoff: Constant(time.Hour)}),
			WithMaxElapsed(50*time.Millisecond), h.option())
		trip(tr, "h")
		h.start = time.Now()
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("RoundTrip = %v, %v; want the 503", resp, err)
		}
		resp.Body.Close()
		h.check(t, "start 1", "end 1 retried=false giveup=\"max_elapsed\"")
		if h.called[0] != 50*time.Millisecond || !h.ends[0].End.Equal(h.start) {
			t.Errorf("end reported at %v with End %v after the start; want at 50ms, End 0",
				h.called[0], h.ends[0].End.Sub(h.start))
		}
	})
}

// A caller whose context ends in the wait gets its error; the hook is told
// the attempt ended, neither retried nor given up.
func TestHookContextEndsInTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hookLog{start: time.Now()}
		tr := New(&perRequest{codes: []int{503}}, WithBackoff(Constant(100*time.Millisecond)), h.option())
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
		if err == nil {
			t.Fatal("RoundTrip succeeded; want the context's error")
		}
		h.check(t, "start 1", "end 1 retried=false giveup=\"\"")
		if !h.ends[0].Retryable {
			t.Errorf("end = %+v; want Retryable", h.ends[0])
		}
	})
}
