package retryhttp

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// runDecide checks one row of the give-up ladder.
func runDecide(t *testing.T, name string, f facts, want verdict) {
	t.Helper()
	if got := decide(f); got != want {
		t.Errorf("%s: decide(%+v) = %+v, want %+v", name, f, got, want)
	}
}

// The ladder, rung by rung: each row breaks exactly the rungs it names, so
// that the reason is the first rung broken.
func TestDecideLadder(t *testing.T) {
	ok := facts{attempt: 1, maxAttempts: 4, replayable: true, backoff: time.Second, maxRA: 30 * time.Second}
	with := func(change func(*facts)) facts { f := ok; change(&f); return f }
	tests := []struct {
		name string
		f    facts
		want verdict
	}{
		{"retry after the backoff", ok, verdict{"", time.Second}},
		{"negative backoff is no wait", with(func(f *facts) { f.backoff = -time.Second }), verdict{"", 0}},
		{"unsafe method", with(func(f *facts) { f.replayable = false }), verdict{GiveUpUnsafeMethod, 0}},
		{"unsafe method never sent", with(func(f *facts) { f.replayable, f.notSent = false, true }), verdict{"", time.Second}},
		{"unsafe method before body", with(func(f *facts) { f.replayable, f.bodyOnce = false, true }), verdict{GiveUpUnsafeMethod, 0}},
		{"body too long", with(func(f *facts) { f.bodyOnce = true }), verdict{GiveUpBody, 0}},
		{"body before attempts", with(func(f *facts) { f.bodyOnce, f.attempt = true, 4 }), verdict{GiveUpBody, 0}},
		{"attempts", with(func(f *facts) { f.attempt = 4 }), verdict{GiveUpAttempts, 0}},
		{"one attempt only", with(func(f *facts) { f.maxAttempts = 1 }), verdict{GiveUpAttempts, 0}},
		{"attempts before Retry-After", with(func(f *facts) { f.attempt, f.retryAfter, f.hasRA = 4, time.Hour, true }), verdict{GiveUpAttempts, 0}},
		{"Retry-After too long", with(func(f *facts) { f.retryAfter, f.hasRA = time.Hour, true }), verdict{GiveUpRetryAfter, time.Hour}},
		{"Retry-After stretches", with(func(f *facts) { f.retryAfter, f.hasRA = 5*time.Second, true }), verdict{"", 5 * time.Second}},
		{"backoff longer than Retry-After", with(func(f *facts) { f.retryAfter, f.hasRA = time.Millisecond, true }), verdict{"", time.Second}},
		{"Retry-After before deadline", with(func(f *facts) { f.retryAfter, f.hasRA, f.untilDL, f.hasDL = time.Hour, true, time.Millisecond, true }), verdict{GiveUpRetryAfter, time.Hour}},
		{"deadline", with(func(f *facts) { f.untilDL, f.hasDL = time.Second, true }), verdict{GiveUpDeadline, time.Second}},
		{"deadline after the wait", with(func(f *facts) { f.untilDL, f.hasDL = time.Second+1, true }), verdict{"", time.Second}},
		{"deadline by Retry-After", with(func(f *facts) { f.retryAfter, f.hasRA, f.untilDL, f.hasDL = 5*time.Second, true, 2*time.Second, true }), verdict{GiveUpDeadline, 5 * time.Second}},
	}
	for _, tt := range tests {
		runDecide(t, tt.name, tt.f, tt.want)
	}
}

// A GetBody that fails gives up with reason body and does not spend the
// budget: the budget is the last rung.
func TestGetBodyFailureSpendsNoBudget(t *testing.T) {
	b := NewBudget(0, 0.1) // one retry in 10 s
	calls := 0
	st := retrytest.NewScriptTransport(steps(503, 503, 200)...)
	tr, _ := testTransport(st, WithBudget(b), WithoutRetryBreaker())
	req := newRequest(t, "PUT", "http://h/", strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) {
		calls++
		return nil, errors.New("gone")
	}
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || calls != 1 {
		t.Fatalf("RoundTrip = %v, %v after %d GetBody calls; want the 503 after 1", resp, err, calls)
	}
	resp.Body.Close()
	if !b.s.Allows("h", time.Now().Unix()) {
		t.Error("the failed GetBody spent the budget's only retry")
	}
}
