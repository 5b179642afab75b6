// Package rotation sends each attempt of a request to an address of its
// host that the request has not tried yet, when the name resolves to
// several: through a pool of connections of that address's own, so that
// a retry does not land on the connection, or the backend, that just
// failed it. It needs only net/http.
package rotation

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A Transport is WithAddressRotation's base: one *http.Transport per
// address, each a copy of proto that dials that address alone. Resolve
// finds a host name's addresses: net.DefaultResolver's, unless a test
// sets another before the first request.
type Transport struct {
	proto   *http.Transport
	Resolve func(ctx context.Context, host string) ([]string, error)

	mu    sync.RWMutex
	pools map[poolKey]*http.Transport
	names map[string]*resolved // by host name
	turn  atomic.Uint64        // first attempts' round robin
}

// poolKey names the Transport of one address of a host and port.
type poolKey struct{ host, addr, port string }

// resolved is a host name's addresses, kept for resolveFor; one caller
// at a time resolves it again, while the others use what is known.
type resolved struct {
	addrs     []string
	at        time.Time
	resolving atomic.Bool
}

// resolveFor is how long a name's addresses are kept: a name that moves
// is followed within it.
const resolveFor = 30 * time.Second

// New rotates the addresses of proto's hosts.
func New(proto *http.Transport) *Transport {
	return &Transport{proto: proto, Resolve: net.DefaultResolver.LookupHost,
		pools: map[poolKey]*http.Transport{}, names: map[string]*resolved{}}
}

// triedKey carries, in an attempt's context, the addresses its request
// has tried.
type triedKey struct{}

// WithTried is ctx carrying t, the addresses its request has tried, for
// the attempts made with it.
func WithTried(ctx context.Context, t *Tried) context.Context {
	return context.WithValue(ctx, triedKey{}, t)
}

// Tried is the addresses a request's attempts went to, in order.
type Tried struct {
	mu    sync.Mutex
	addrs []string
}

func (r *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Hostname()
	if host == "" || net.ParseIP(host) != nil {
		return r.proto.RoundTrip(req) // an address already: nothing to choose
	}
	addrs, err := r.addresses(req.Context(), host)
	if err != nil || len(addrs) < 2 {
		return r.proto.RoundTrip(req) // one address, or the dial will say
	}
	t, _ := req.Context().Value(triedKey{}).(*Tried)
	return r.pool(host, r.pick(addrs, t), port(req)).RoundTrip(req)
}

// pick is the address of an attempt: a first attempt takes the next in
// turn (only first attempts move the turn on, so that retries do not
// skew it); a retry, the next after the last its request tried that it
// has not tried; when all have been tried, the one after the last.
func (r *Transport) pick(addrs []string, t *Tried) string {
	if t == nil {
		return addrs[r.turn.Add(1)%uint64(len(addrs))]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var start int
	if n := len(t.addrs); n == 0 {
		start = int(r.turn.Add(1) % uint64(len(addrs)))
	} else {
		start = (slices.Index(addrs, t.addrs[n-1]) + 1) % len(addrs) // -1 (gone from the name) starts at 0
	}
	pick := addrs[start]
	for i := range addrs {
		if a := addrs[(start+i)%len(addrs)]; !slices.Contains(t.addrs, a) {
			pick = a
			break
		}
	}
	t.addrs = append(t.addrs, pick)
	return pick
}

// addresses are host's addresses, resolved at most every resolveFor: one
// request at a time resolves a name whose addresses are old, on its own
// path and bounded by its context, while the others use what is known; a
// resolver that fails keeps what is known for another resolveFor.
func (r *Transport) addresses(ctx context.Context, host string) ([]string, error) {
	r.mu.RLock()
	res := r.names[host]
	r.mu.RUnlock()
	if res != nil && (time.Since(res.at) < resolveFor || !res.resolving.CompareAndSwap(false, true)) {
		return res.addrs, nil
	}
	addrs, err := r.Resolve(ctx, host)
	switch {
	case err != nil && res == nil:
		return nil, err
	case err != nil || len(addrs) == 0:
		addrs = res.addrs // the last known, while the resolver fails
	default:
		addrs = slices.Sorted(slices.Values(addrs))
	}
	r.store(host, addrs)
	return addrs, nil
}

func (r *Transport) store(host string, addrs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.names) >= 1024 {
		clear(r.names) // bounded: a Transport talks to few names
	}
	r.names[host] = &resolved{addrs: addrs, at: time.Now()}
}

// pool is the Transport of one address of host: a copy of proto that
// dials that address where it would dial host (and a proxy, if one
// applies, as proto would: through a proxy no address is chosen).
func (r *Transport) pool(host, addr, port string) *http.Transport {
	key := poolKey{host, addr, port}
	r.mu.RLock()
	p := r.pools[key]
	r.mu.RUnlock()
	if p != nil {
		return p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pools[key]; p != nil {
		return p
	}
	p = r.dialing(net.JoinHostPort(host, port), net.JoinHostPort(addr, port))
	if len(r.pools) >= 1024 {
		for k, old := range r.pools { // bounded: close and forget one, any
			old.CloseIdleConnections()
			delete(r.pools, k)
			break
		}
	}
	r.pools[key] = p
	return p
}

// dialing is a copy of proto that dials target where it would dial name.
func (r *Transport) dialing(name, target string) *http.Transport {
	p := r.proto.Clone()
	if len(r.proto.TLSNextProto) > 0 {
		// HTTP/2 set up by golang.org/x/net/http2 (Vault's client is): its
		// one pool per host:port would carry every address's attempts on
		// one connection. Each copy speaks the standard library's HTTP/2
		// over its own connections instead.
		p.TLSNextProto, p.ForceAttemptHTTP2 = nil, true
	}
	dial := r.proto.DialContext
	//lint:ignore SA1019 a base's deprecated Dial is still its way to dial, and is kept
	if old := r.proto.Dial; dial == nil && old != nil {
		dial = func(_ context.Context, network, a string) (net.Conn, error) { return old(network, a) }
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	p.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		if a == name {
			a = target
		}
		return dial(ctx, network, a)
	}
	return p
}

// CloseIdleConnections closes the idle connections of every address.
func (r *Transport) CloseIdleConnections() {
	r.proto.CloseIdleConnections()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pools {
		p.CloseIdleConnections()
	}
}

// port is req's port, or its scheme's.
func port(req *http.Request) string {
	if p := req.URL.Port(); p != "" {
		return p
	}
	if req.URL.Scheme == "https" {
		return "443"
	}
	return "80"
}
