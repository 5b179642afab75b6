package admission

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// Idle hosts are dropped when new ones come, so that memory follows the
// hosts in use; a host whose breaker is open is kept.
func TestHostsEvicted(t *testing.T) {
	g := testGate(share(0.1, 10), Breaker{})
	trip(g, g.hosts.getKey("busy", nil, 0))
	for i := range 1000 {
		g.hosts.getKey(fmt.Sprintf("old%d", i), nil, 0)
	}
	for i := range 1000 {
		g.hosts.getKey(fmt.Sprintf("new%d", i), nil, evictAfter+1)
	}
	g.hosts.mu.Lock()
	read := *g.hosts.read.Load()
	g.hosts.mu.Unlock()
	if _, ok := read["old0"]; ok {
		t.Error("an idle host was kept")
	}
	if _, ok := read["busy"]; !ok {
		t.Error("a host with an open breaker was dropped")
	}
	if n := g.hosts.len(); n > 1001 {
		t.Errorf("%d hosts tracked, want at most the 1000 in use and the busy one", n)
	}
}

func TestCanonicalHost(t *testing.T) {
	var buf [maxHostKey]byte
	key := func(scheme, host string) string {
		s, b := canonicalHost(scheme, host, &buf)
		if b != nil {
			return string(b)
		}
		return s
	}
	same := [][2]string{
		{"https", "example.com"}, {"https", "Example.com"}, {"https", "example.com:443"}, {"https", "EXAMPLE.COM:443"},
	}
	for _, h := range same {
		if got := key(h[0], h[1]); got != "example.com" {
			t.Errorf("canonicalHost(%q, %q) = %q, want example.com", h[0], h[1], got)
		}
	}
	for _, tt := range [][3]string{
		{"http", "example.com:80", "example.com"},
		{"http", "example.com:443", "example.com:443"},
		{"https", "example.com:8443", "example.com:8443"},
		{"https", "[::1]:443", "[::1]"},
		{"https", "[FE80::1]", "[fe80::1]"},
	} {
		if got := key(tt[0], tt[1]); got != tt[2] {
			t.Errorf("canonicalHost(%q, %q) = %q, want %q", tt[0], tt[1], got, tt[2])
		}
	}
	// A lookup by a spelling that needs changing allocates nothing.
	if a := testing.AllocsPerRun(100, func() { canonicalHost("https", "Example.com:443", &buf) }); a != 0 {
		t.Errorf("canonicalHost allocates %v times", a)
	}
}

// A Budget shared by two Transports stays one budget for as long as
// either uses it, past a minute idle and the evictions it allows.
func TestSharedBudgetStaysOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := share(0.1, 0)
		c1, c2 := New(Settings{Budget: b}), New(Settings{Budget: b})
		h1 := c1.hosts.get("h")
		time.Sleep(2 * evictAfter * time.Second)
		for i := range 200 { // the second Transport's other hosts make both maps merge
			c2.hosts.getKey("other"+string(rune('a'+i%26))+string(rune('a'+i/26)), nil, unixSecond())
		}
		if h2 := c2.hosts.get("h"); h2.bud.more.Load() != h1.bud.more.Load() {
			t.Fatal("two Transports sharing a Budget count host h apart after a minute idle")
		}
	})
}

// A Gate keeps at most maxHosts hosts, failing ones included: at the
// bound, a host not yet known is served by a state that is not kept,
// until a second later the idle hosts make room.
func TestHostsAreBounded(t *testing.T) {
	g := New(Settings{Budget: share(0.1, 1)})
	sec := unixSecond()
	failing := g.hosts.getKey("failing", nil, sec)
	failing.health.fail(mono(), failingAfter) // a host whose state may not go
	for i := range maxHosts - 1 {
		g.hosts.getKey(fmt.Sprintf("h%d", i), nil, sec)
	}
	if n := g.hosts.len(); n != maxHosts {
		t.Fatalf("%d hosts kept, want %d", n, maxHosts)
	}
	if a, b := g.hosts.getKey("new", nil, sec), g.hosts.getKey("new", nil, sec); a == b || g.hosts.len() != maxHosts {
		t.Fatalf("at the bound, a new host was kept (%d hosts)", g.hosts.len())
	}
	if n := g.budget.Hosts(); n > maxHosts {
		t.Errorf("the budget keeps %d hosts, more than %d", n, maxHosts)
	}
	later := g.hosts.getKey("new", nil, sec+2)
	if g.hosts.getKey("new", nil, sec+2) != later {
		t.Error("a second later, with the idle hosts gone, a new host is still not kept")
	}
	if n := g.hosts.len(); n != 2 {
		t.Errorf("a second later, %d hosts kept, want 2 (the failing one, the new one)", n)
	}
}
