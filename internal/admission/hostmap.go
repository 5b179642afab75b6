// This file holds hostMap, the per-destination-host state of a Transport
// (admission.go) and of a Budget (budget.go), and the canonical form of a host
// that keys it.

package admission

import (
	"strings"
	"sync"
	"sync/atomic"
)

// hostMap maps hosts to state. A lookup of a known host is one atomic load
// and a map read, with no lock: the read map is never written, only
// replaced. A new host goes into a small dirty map under a mutex; the dirty
// map is merged into a new read map once it holds a quarter as many hosts
// as the read map, or once lookups that had to take the mutex add up to an
// eighth of it (a new host in demand is soon lock-free), so that the
// copying is O(1) amortised per lookup. Each merge
// drops the hosts that were idle for evictAfter seconds and whose state
// says it can go, so that memory follows the hosts in use. Two distinct
// hosts never share state.
type hostMap[T any] struct {
	read atomic.Pointer[map[string]*hostEntry[T]]

	mu     sync.Mutex
	dirty  map[string]*hostEntry[T] // hosts not yet in read
	misses int                      // lookups that took mu since the last merge
	full   int64                    // the second of the last merge forced by maxHosts

	init      func(key string, v *T) // if set, prepares a new entry before it is shared
	borrowed  bool                   // keys are a Gate's own, kept as they are, not copied
	evictable func(*T) bool          // if set, says whether an idle entry may go
}

type hostEntry[T any] struct {
	v    T
	used atomic.Int64 // the last second it was looked up in
}

// evictAfter is how long a host stays idle before its state may be dropped:
// longer than the budget's window, after which its state says nothing.
const evictAfter = 60

// maxHosts bounds the hosts a map keeps, whatever their state says. At
// the bound, a merge (at most once a second) drops every host that may
// go and was not used in the last second; a host not yet known while it
// is still full gets a state of its own that is not kept, as if it were
// new at each request (it keeps no health, budget or breaker between
// them).
const maxHosts = 1 << 17

func (e *hostEntry[T]) touch(sec int64) {
	if e.used.Load() != sec {
		e.used.Store(sec)
	}
}

// get returns host's state, as of second 0; tests use it.
func (hm *hostMap[T]) get(host string) *T { return hm.getKey(host, nil, 0) }

// getKey returns the state of the host whose key is s, or b if b is not nil
// (a key built on the caller's stack: the lookup then allocates nothing),
// and marks it used in second sec.
func (hm *hostMap[T]) getKey(s string, b []byte, sec int64) *T {
	if m := hm.read.Load(); m != nil {
		var e *hostEntry[T]
		var ok bool
		if b != nil {
			e, ok = (*m)[string(b)]
		} else {
			e, ok = (*m)[s]
		}
		if ok {
			e.touch(sec)
			return &e.v
		}
	}
	return &hm.slow(s, b, sec).v
}

func (hm *hostMap[T]) slow(s string, b []byte, sec int64) *hostEntry[T] {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	var read map[string]*hostEntry[T]
	if p := hm.read.Load(); p != nil {
		read = *p
	}
	var e *hostEntry[T]
	var ok bool
	if b != nil {
		if e, ok = read[string(b)]; !ok {
			e, ok = hm.dirty[string(b)]
		}
	} else if e, ok = read[s]; !ok {
		e, ok = hm.dirty[s]
	}
	if !ok {
		if b != nil {
			s = string(b)
		} else if !hm.borrowed {
			s = strings.Clone(s) // not a part of the request's URL, which it would keep
		}
		e = new(hostEntry[T])
		if hm.init != nil {
			hm.init(s, &e.v)
		}
		if len(read)+len(hm.dirty) >= maxHosts {
			if !hm.room(read, sec) {
				if hm.evictable != nil {
					hm.evictable(&e.v) // not kept: let go of what it holds
				}
				return e
			}
			read = *hm.read.Load() // merged
		}
		if hm.dirty == nil {
			hm.dirty = make(map[string]*hostEntry[T])
		}
		hm.dirty[s] = e
	}
	e.touch(sec)
	hm.misses++
	if len(hm.dirty) >= len(read)/4+8 || hm.misses >= len(read)/8+8 {
		hm.merge(read, sec)
	}
	return e
}

// room reports whether a map at maxHosts has room for one more host,
// after a merge that drops every host that may go and was not used in
// the last second, if none was made in this one; hm.mu is held.
func (hm *hostMap[T]) room(read map[string]*hostEntry[T], sec int64) bool {
	if hm.full != sec {
		hm.full = sec
		hm.mergeIdle(read, sec, 1)
	}
	n := len(hm.dirty)
	if p := hm.read.Load(); p != nil {
		n += len(*p)
	}
	return n < maxHosts
}

// merge makes a new read map of read and the dirty hosts, without the
// idle ones that may go; hm.mu is held.
func (hm *hostMap[T]) merge(read map[string]*hostEntry[T], sec int64) {
	hm.mergeIdle(read, sec, evictAfter)
}

// mergeIdle is merge, dropping the hosts that may go and were not used
// for more than idle seconds.
func (hm *hostMap[T]) mergeIdle(read map[string]*hostEntry[T], sec, idle int64) {
	m := make(map[string]*hostEntry[T], len(read)+len(hm.dirty))
	for _, src := range []map[string]*hostEntry[T]{read, hm.dirty} {
		for k, e := range src {
			if sec-e.used.Load() > idle && (hm.evictable == nil || hm.evictable(&e.v)) {
				continue
			}
			m[k] = e
		}
	}
	hm.read.Store(&m)
	hm.dirty, hm.misses = nil, 0
}

func (hm *hostMap[T]) len() int {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	n := len(hm.dirty)
	if p := hm.read.Load(); p != nil {
		n += len(*p)
	}
	return n
}

// maxHostKey bounds the canonical hosts built on the stack.
const maxHostKey = 128

// canonicalHost returns the key of host's state: the host in lower case,
// without the scheme's default port, so that Example.com, example.com and
// example.com:443 over https share one state. A host already in that form,
// the common case, is returned as s, as it is; another is written into buf
// and returned as b, so that a lookup with it allocates nothing.
func canonicalHost(scheme, host string, buf *[maxHostKey]byte) (s string, b []byte) {
	trimmed := host
	switch {
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		trimmed = host[:len(host)-4]
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		trimmed = host[:len(host)-3]
	}
	switch {
	case !hasUpper(trimmed):
		return trimmed, nil
	case len(trimmed) > maxHostKey:
		return strings.ToLower(trimmed), nil
	}
	b = buf[:len(trimmed)]
	for i := 0; i < len(trimmed); i++ {
		c := trimmed[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return "", b
}

// hasUpper reports whether s has an ASCII upper-case letter.
func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}
