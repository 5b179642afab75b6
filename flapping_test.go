package retryhttp

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// flapBase is a host that flaps: healthy for warmup, then down for spell
// and up for spell, in turn, cycles times, then up. Down, it answers 503
// to every attempt; up, 200, or, with perTenth set, 200 to at most that
// many attempts a tenth of a second and 503 to the rest (an overload).
// Each attempt takes 10 ms, and is judged as it arrives.
type flapBase struct {
	start          time.Time
	warmup, spell  time.Duration
	cycles         int
	perTenth       int
	attempts       atomic.Int64
	mu             sync.Mutex
	tenth, servedT int64 // the tenth of a second counted, and what was served in it
}

func (b *flapBase) down(at time.Duration) bool {
	in := at - b.warmup
	return in >= 0 && in < time.Duration(2*b.cycles)*b.spell && (in/b.spell)%2 == 0
}

// serves reports whether the host serves an attempt that arrives at at.
func (b *flapBase) serves(at time.Duration) bool {
	if b.down(at) {
		return false
	}
	if b.perTenth == 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := int64(at / (100 * time.Millisecond)); t != b.tenth {
		b.tenth, b.servedT = t, 0
	}
	if b.servedT >= int64(b.perTenth) {
		return false
	}
	b.servedT++
	return true
}

func (b *flapBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.attempts.Add(1)
	ok := b.serves(time.Since(b.start))
	time.Sleep(10 * time.Millisecond)
	if !ok {
		return reply(r, http.StatusServiceUnavailable, nil), nil
	}
	return reply(r, http.StatusOK, nil), nil
}

// flapRun is what a flapping host made of a client's requests: how many
// started in its down spells and how many of those succeeded, and the
// requests and attempts in all.
type flapRun struct {
	requests, attempts int64
	down, saved        int64
}

// runFlapping sends rate requests a second to b, evenly spaced, through
// its warmup and its spells, with the Transport's defaults, and waits for
// every request to end.
func runFlapping(t *testing.T, b *flapBase, rate int) flapRun {
	tr := New(b)
	b.start = time.Now()
	var down, saved, requests atomic.Int64
	var wg sync.WaitGroup
	every := time.Second / time.Duration(rate)
	for at := time.Duration(0); at < b.warmup+time.Duration(2*b.cycles)*b.spell; at += every {
		time.Sleep(time.Until(b.start.Add(at)))
		inDown := b.down(time.Since(b.start))
		requests.Add(1)
		wg.Go(func() {
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://flap/", nil))
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			if inDown {
				down.Add(1)
				if ok {
					saved.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return flapRun{requests: requests.Load(), attempts: b.attempts.Load(), down: down.Load(), saved: saved.Load()}
}

// A host that flaps, down 1 s and up 1 s in turn, is a run of blips: each
// recovery answers what it releases, which so owes nothing, and the next
// recovery lends again. With the defaults, at 200 requests a second, at
// least 90% of the requests that start in a down spell are saved, at
// about one retry each: attempts per request at most 1 + 1.1 × the down
// spells' share of the requests (half of them here, less the warmup).
func TestFlappingHostIsSaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runFlapping(t, &flapBase{warmup: 2 * time.Second, spell: time.Second, cycles: 8}, 200)
		share := float64(r.saved) / float64(r.down)
		perRequest := float64(r.attempts) / float64(r.requests)
		t.Logf("%d requests, %d attempts (%.2f a request); %d of the %d that started in a down spell saved (%.1f%%)",
			r.requests, r.attempts, perRequest, r.saved, r.down, 100*share)
		if share < 0.9 {
			t.Errorf("%.1f%% of the down spells' requests saved, want at least 90%%", 100*share)
		}
		if limit := 1 + 1.1*float64(r.down)/float64(r.requests); perRequest > limit {
			t.Errorf("%.2f attempts a request, want at most %.2f", perRequest, limit)
		}
	})
}

// A host that flaps and is overloaded when up (it serves 10 requests a
// tenth of a second of the 20 offered, and refuses the rest) turns away
// much of what its recoveries release: what was lent and turned away
// owes, and no recovery lends again until first attempts have repaid it.
// The retries stay at the budget's share: at most 1.2 attempts a
// request, not one retry for each request that started in a down spell
// (1.44 above).
func TestFlappingOverloadedHostIsNotMultiplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runFlapping(t, &flapBase{warmup: 2 * time.Second, spell: time.Second, cycles: 8, perTenth: 10}, 200)
		perRequest := float64(r.attempts) / float64(r.requests)
		t.Logf("%d requests, %d attempts (%.2f a request); %d of the %d that started in a down spell saved",
			r.requests, r.attempts, perRequest, r.saved, r.down)
		if perRequest > 1.2 {
			t.Errorf("%.2f attempts a request to a flapping, overloaded host, want at most 1.2", perRequest)
		}
	})
}
