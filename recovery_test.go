package retryhttp

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// weakAfter is a host that serves no one until up, and then only rate
// requests a second (a burst of a twentieth of a second), answering 503
// at once to the rest; it counts the retries it turns away after up (an
// attempt whose request, by its X-Id, it has seen before).
type weakAfter struct {
	up      time.Time
	rate    float64
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	seen    map[string]bool
	refused int // retries turned away after up
}

func (w *weakAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := r.Header.Get("X-Id")
	retry := w.seen[id]
	w.seen[id] = true
	now := time.Now()
	if now.Before(w.up) {
		w.last = now
		return reply(r, 503, nil), nil
	}
	w.tokens = min(w.tokens+now.Sub(w.last).Seconds()*w.rate, w.rate/20)
	w.last = now
	if w.tokens < 1 {
		if retry {
			w.refused++
		}
		return reply(r, 503, nil), nil
	}
	w.tokens--
	return reply(r, 200, nil), nil
}

// A host that comes back from a 1 s outage serving only 1.5× the offered
// rate (100 requests a second offered, 150 served): the retries held in
// the outage are let back slowly once it turns some away, so that it
// turns away few of them (2 to 4; with the release that doubled each
// round trip, 112), and the requests started after it is back succeed.
func TestRecoveryIntoAWeakHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := &weakAfter{up: start.Add(time.Second), rate: 150, last: start, seen: map[string]bool{}}
		tr := New(retrytest.RoundTripperFunc(base.RoundTrip))
		var after, afterOK atomic.Int64
		var wg sync.WaitGroup
		for i := range 300 { // 3 s at 100 a second
			time.Sleep(10 * time.Millisecond)
			wg.Go(func() {
				req := newRequest(t, "GET", "http://h/", nil)
				req.Header.Set("X-Id", strconv.Itoa(i))
				late := time.Now().After(base.up)
				resp, err := tr.RoundTrip(req)
				if late {
					after.Add(1)
				}
				if err == nil {
					resp.Body.Close()
					if late && resp.StatusCode == 200 {
						afterOK.Add(1)
					}
				}
			})
		}
		wg.Wait()
		base.mu.Lock()
		refused := base.refused
		base.mu.Unlock()
		if refused > 20 {
			t.Errorf("the weak host turned away %d retries after it came back, want at most 20", refused)
		}
		if ok, n := afterOK.Load(), after.Load(); ok < n*99/100 {
			t.Errorf("%d of the %d requests started after the host came back succeeded, want at least 99%%", ok, n)
		}
	})
}
