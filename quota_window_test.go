package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// quotaRefused reports whether err is quota pacing's refusal.
func quotaRefused(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == GiveUpQuota && e.Attempts == 0
}

// A host that states a window a day long once (RateLimit-Policy), then
// says on every answer that its quota is spent for a second: after each
// reset the client rolls the quota over into that day-long window, a
// guess, and each answer's word replaces the guess. Ten requests 2 s
// apart all go: none is refused for a window the host's words deny.
func TestQuotaPacingHostCorrectsARolledWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int64, r *http.Request) (*http.Response, error) {
			h := http.Header{"Ratelimit": {`"default";r=0;t=1`}}
			if n == 1 {
				h.Set("RateLimit-Policy", `"default";q=1;w=86400`)
			}
			return reply(r, 200, h), nil
		}}
		tr := New(base, WithQuotaPacing(5*time.Second, false))
		refused := 0
		for i := range 10 {
			if i > 0 {
				time.Sleep(2 * time.Second)
			}
			switch err := getOK(t, tr, context.Background()); {
			case quotaRefused(err):
				refused++
			case err != nil:
				t.Fatal(err)
			}
		}
		if refused > 0 {
			t.Errorf("%d of 10 requests 2 s apart refused (quota), %d sent; want none: each answer says the quota resets in a second", refused, base.n.Load())
		}
	})
}

// One 429 with Retry-After: 10, then answers that say nothing of a
// quota: the client learns a quota of one per 10 s from it, and rolls it
// over once the 10 s are past; the answer to the attempt sent in that
// guess says nothing of it, and the guess ends there. Requests a second
// apart are refused only while the host's Retry-After lasts, not one a
// window for good.
func TestQuotaPacingDropsAGuessTheHostDoesNotRepeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int64, r *http.Request) (*http.Response, error) {
			if n == 1 {
				return reply(r, http.StatusTooManyRequests, http.Header{"Retry-After": {"10"}}), nil
			}
			return reply(r, 200, nil), nil
		}}
		tr := New(base, WithQuotaPacing(5*time.Second, false), WithMaxAttempts(1))
		start := time.Now()
		late := 0
		for i := range 60 {
			time.Sleep(time.Duration(min(i, 1)) * time.Second)
			switch err := getOK(t, tr, context.Background()); {
			case quotaRefused(err) && time.Since(start) >= 10*time.Second:
				late++
			case err != nil && !quotaRefused(err):
				t.Fatal(err)
			}
		}
		if late > 0 {
			t.Errorf("%d requests refused (quota) after the 429's 10 s were over, %d sent of 60", late, base.n.Load())
		}
	})
}

// FuzzQuotaPacing drives one client's requests against a host whose
// answers say wild things of its quota (RateLimit's r and t, and
// RateLimit-Policy's q and w, a day and beyond), in virtual time, and
// checks that pacing follows the host's last answer: a request made at
// once after it goes at once if the answer left some (spread: within
// its share of the time to the reset, or at the reset if others' use
// spent the rest first), and otherwise waits for that reset (within a
// second: it is told in whole seconds) or is refused only if that is
// past maxWait; one made after the reset goes at once; and no wait is
// past maxWait. The script is steps of four bytes: the
// gap before the request, r, t, and the policy (or no word).
func FuzzQuotaPacing(f *testing.F) {
	f.Add(uint8(19), false, []byte{0, 0, 1, 1, 11, 0, 1, 0, 0, 0, 1, 0, 11, 0, 1, 0, 0, 3, 1, 0})
	f.Add(uint8(3), true, []byte{0, 4, 9, 2 | 6<<4, 0, 3, 1, 0, 27, 0, 12, 0, 0, 5, 2, 0})
	f.Add(uint8(40), false, []byte{0, 6, 1, 0, 0, 0, 1, 0x80, 15, 0, 5, 2 | 7<<4, 0, 1, 15, 0})
	f.Add(uint8(0), true, []byte{0, 0, 11, 1, 0, 3, 13, 0, 7, 7, 3, 2 | 1<<2 | 5<<4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, wait uint8, spread bool, script []byte) {
		if len(script) > 4*40 {
			script = script[:4*40]
		}
		maxWait := time.Duration(1+int(wait)) * 250 * time.Millisecond
		synctest.Test(t, func(t *testing.T) { fuzzQuota(t, maxWait, spread, script) })
	})
}

var (
	fuzzGaps = [...]time.Duration{250 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second,
		10 * time.Second, time.Minute, time.Hour, 25 * time.Hour}
	fuzzRemaining = [...]int64{0, 0, 0, 1, 2, 5, 1_000_000_000, 1_000_000_000_000} // the last, near the 2^40 at which counts saturate
	fuzzReset     = [...]int64{0, 1, 1, 2, 3, 5, 10, 59, 60, 3600, 86399, 86400, 86401, 1_000_000, 1_800_000_000, 1 << 40}
	fuzzQuotas    = [...]int64{1, 5, 1_000_000_000, 0}
	fuzzWindows   = [...]int64{0, 1, 60, 3600, 86399, 86400, 86401, 1 << 40}
)

// fuzzWord is what one step's answer says of the quota: r and t, and
// whether it says it at all.
type fuzzWord struct {
	said bool
	r, t int64
}

// fuzzAnswer is the header of a step's answer, and the word it says.
func fuzzAnswer(step []byte) (http.Header, fuzzWord) {
	w := fuzzWord{said: step[3]&0x80 == 0, r: fuzzRemaining[step[1]%8], t: fuzzReset[step[2]%16]}
	h := http.Header{}
	if w.said {
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, w.r, w.t))
	}
	switch step[3] % 4 {
	case 1:
		h.Set("RateLimit-Policy", `"default";q=1;w=86400`)
	case 2:
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, fuzzQuotas[step[3]>>2%4], fuzzWindows[step[3]>>4%8]))
	}
	return h, w
}

func fuzzQuota(t *testing.T, maxWait time.Duration, spread bool, script []byte) {
	var step []byte
	var sentAt atomic.Int64 // the last attempt's, from the start
	start := time.Now()
	base := &scripted{answer: func(_ int64, r *http.Request) (*http.Response, error) {
		sentAt.Store(int64(time.Since(start)))
		h, _ := fuzzAnswer(step)
		return reply(r, 200, h), nil
	}}
	tr := New(base, WithQuotaPacing(maxWait, spread), WithMaxAttempts(1))
	var last fuzzWord // the word of the last answer, if it was one the client follows
	var lastAt time.Duration
	for i := 0; i+4 <= len(script); i += 4 {
		step = script[i : i+4]
		if g := step[0]; g%4 != 0 {
			time.Sleep(fuzzGaps[g/4%8])
		}
		began, n := time.Since(start), base.n.Load()
		err := getOK(t, tr, context.Background())
		sent := base.n.Load() > n
		waited := time.Duration(sentAt.Load()) - began
		switch {
		case !sent && !quotaRefused(err):
			t.Fatalf("step %d: %v; want an answer or quota pacing's refusal", i/4, err)
		case sent && waited > maxWait:
			t.Fatalf("step %d: waited %v for quota pacing, past maxWait %v", i/4, waited, maxWait)
		}
		if last.said {
			last.check(t, i/4, began-lastAt, sent, waited, maxWait, spread)
		}
		if sent {
			_, last = fuzzAnswer(step)
			last.said = last.said && last.t <= 86400 // longer: not followed
			lastAt = time.Since(start)
		}
	}
}

// check checks a request made elapsed after the answer that said w: sent
// after waiting waited, or refused.
func (w fuzzWord) check(t *testing.T, step int, elapsed time.Duration, sent bool, waited, maxWait time.Duration, spread bool) {
	reset := time.Duration(w.t) * time.Second
	if w.r == 0 {
		reset = max(reset, 250*time.Millisecond) // a spent quota is not back at once
	}
	lo, hi := time.Duration(0), time.Duration(0) // the wait that follows the word
	switch {
	case elapsed >= reset:
	case elapsed > 0:
		return // others' use, predicted, may have spent it since
	case w.r == 0 || (spread && (!sent || waited > reset/time.Duration(w.r))):
		// Spent: until the reset. (Spread, others' use, predicted from
		// the host's words, may spend what is left before the turn.)
		lo, hi = reset-time.Second, reset+time.Second
	case spread:
		hi = reset / time.Duration(w.r) // its share of the time to the reset
	}
	if (sent && (waited < lo || waited > hi)) || (!sent && hi <= maxWait) {
		t.Fatalf("step %d, %v after the answer r=%d;t=%d: sent %v after %v, want a wait within [%v, %v] (refused only past maxWait %v)",
			step, elapsed, w.r, w.t, sent, waited, lo, hi, maxWait)
	}
}
