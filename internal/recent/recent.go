// Package recent remembers what a Transport saw lately, bounded whatever
// the traffic: the idempotency keys of the last minute (Keys), and the
// requests that ended on a failure worth retrying (Failures), and the
// hosts a layer above retried lately (Owners), so that a layer above that
// retries can be seen doing it. Time is a Unix second, given: Second's.
package recent

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Failures remember the requests that ended, lately, on a failure
// worth retrying, so that one that comes again is seen as a retry of a
// layer above that says nothing of it (go-resty, go-retryablehttp). It is
// two generations of at most MaxKeys each, kept RepeatFor seconds,
// like Keys. It only counts and warns: whether the request that
// comes again is the same operation cannot be known (a reused
// *http.Request may carry another body of the same length), so nothing
// of the first, its idempotency key included, is given to the second.
type Failures struct {
	newest    atomic.Int64 // the second of the latest failure: a request later than RepeatFor after it takes no lock
	mu        sync.RWMutex
	cur, prev map[failedKey]int64 // the second each failed in
	since     int64
}

// failedKey is what makes two requests alike: not their bodies, which are
// not read to find out.
type failedKey struct {
	method, host, path, query string
	length                    int64
}

// RepeatFor is how long after a failure the same request counts as a
// retry of a layer above: longer than any layer's usual wait.
const RepeatFor = 30

// Record remembers that req ended on a failure worth retrying, at second
// sec.
func (r *Failures) Record(req *http.Request, method string, sec int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil || sec-r.since >= RepeatFor || len(r.cur) >= MaxKeys {
		r.prev = r.cur
		if sec-r.since >= 2*RepeatFor {
			r.prev = nil
		}
		r.cur, r.since = make(map[failedKey]int64), sec
	}
	r.cur[failedKey{method, req.URL.Host, req.URL.Path, req.URL.RawQuery, req.ContentLength}] = sec
	r.newest.Store(sec)
}

// Again reports whether a request like req failed within the last
// RepeatFor seconds. Without a failure that recent, it costs one atomic
// load (and no clock read but the one the budget keeps).
func (r *Failures) Again(req *http.Request, method string, now func() int64) bool {
	newest := r.newest.Load()
	if newest == 0 {
		return false
	}
	sec := now()
	if sec-newest > RepeatFor {
		return false
	}
	k := failedKey{method, req.URL.Host, req.URL.Path, req.URL.RawQuery, req.ContentLength}
	r.mu.RLock()
	at, ok := r.cur[k]
	if !ok {
		at, ok = r.prev[k]
	}
	r.mu.RUnlock()
	return ok && sec-at <= RepeatFor
}

// Keys remember the idempotency keys seen in the last minute,
// each with the second it was seen in, in two generations of at most
// MaxKeys each, so that memory is bounded whatever the traffic.
type Keys struct {
	mu        sync.Mutex
	cur, prev map[string]int64
	since     int64 // the second cur was started in
}

const (
	MaxKeys = 4096
	KeysFor = 60 // seconds a key is remembered; and a generation lasts
)

// Seen records key in second sec and reports whether it was seen in the
// minute before.
func (r *Keys) Seen(key string, sec int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil || sec-r.since >= KeysFor || len(r.cur) >= MaxKeys {
		r.prev = r.cur
		if sec-r.since >= 2*KeysFor {
			r.prev = nil // both generations are stale
		}
		r.cur, r.since = make(map[string]int64), sec
	}
	t, ok := r.cur[key]
	if !ok {
		t, ok = r.prev[key]
	}
	r.cur[key] = sec
	return ok && sec-t < KeysFor
}

// Owners remember the hosts that a layer above retried a request to in
// the last OwnFor seconds, each with the second it last did, in two
// generations of at most MaxKeys each, like Keys.
type Owners struct {
	newest    atomic.Int64 // the second of the latest note: a host asked later than OwnFor after it takes no lock
	mu        sync.Mutex
	cur, prev map[string]int64
	since     int64
}

// OwnFor is how long after a layer above last retried a request to a
// host it owns the schedule of every request to it (seconds).
const OwnFor = 60

// Note remembers that a layer above retried a request to host in second
// sec.
func (r *Owners) Note(host string, sec int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil || sec-r.since >= OwnFor || len(r.cur) >= MaxKeys {
		r.prev = r.cur
		if sec-r.since >= 2*OwnFor {
			r.prev = nil
		}
		r.cur, r.since = make(map[string]int64), sec
	}
	r.cur[host] = sec
	r.newest.Store(sec)
}

// Own reports whether a layer above retried a request to host within the
// last OwnFor seconds, now being second now(). Without a note that
// recent, it costs one atomic load and no clock read.
func (r *Owners) Own(host string, now func() int64) bool {
	newest := r.newest.Load()
	if newest == 0 {
		return false
	}
	sec := now()
	if sec-newest > OwnFor {
		return false
	}
	r.mu.Lock()
	at, ok := r.cur[host]
	if !ok {
		at, ok = r.prev[host]
	}
	r.mu.Unlock()
	return ok && sec-at <= OwnFor
}

// Second is the Unix second now, the time the Transport gives this
// package.
func Second() int64 { return time.Now().Unix() }
