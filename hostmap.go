// This file holds hostMap, the per-destination-host state shared by the
// Budget (budget.go) and the retry breaker (breaker.go).

package retryhttp

import (
	"sync"
	"sync/atomic"
)

// maxHosts bounds the hosts a hostMap tracks one by one; the rest share one
// entry, so that a client sending to endless hosts cannot grow it without
// bound.
const maxHosts = 1024

// overflowHost is the key of the entry shared by hosts past maxHosts.
const overflowHost = ""

// hostMap maps hosts to state, copy on write: a lookup of a known host is
// one atomic load and a map read, with no lock; adding a host copies the
// map under a mutex, which happens once per host.
type hostMap[T any] struct {
	mu   sync.Mutex // serialises adding a host; readers never take it
	m    atomic.Pointer[map[string]*T]
	init func(*T) // if set, prepares a new entry before it is shared
}

func (hm *hostMap[T]) get(host string) *T {
	if m := hm.m.Load(); m != nil {
		if v, ok := (*m)[host]; ok {
			return v
		}
	}
	hm.mu.Lock()
	defer hm.mu.Unlock()
	var old map[string]*T
	if p := hm.m.Load(); p != nil {
		old = *p
	}
	if v, ok := old[host]; ok {
		return v
	}
	if len(old) >= maxHosts {
		host = overflowHost
		if v, ok := old[host]; ok {
			return v
		}
	}
	m := make(map[string]*T, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	v := new(T)
	if hm.init != nil {
		hm.init(v)
	}
	m[host] = v
	hm.m.Store(&m)
	return v
}

func (hm *hostMap[T]) len() int {
	if p := hm.m.Load(); p != nil {
		return len(*p)
	}
	return 0
}
